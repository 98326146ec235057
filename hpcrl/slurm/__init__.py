"""Slurm batch scripts: the templates in ``slurm/`` and rendering them from a config."""
from hpcrl.slurm.render import Rendered, RenderOptions, render
from hpcrl.slurm.sizing import JobShape, size_job
from hpcrl.slurm.templates import TEMPLATE_NAMES, TemplateError, load_template

__all__ = ["JobShape", "RenderOptions", "Rendered", "TEMPLATE_NAMES", "TemplateError",
           "load_template", "render", "size_job"]
