"""``hpcrl slurm sweep``: the points of a sweep as one Slurm job array.

The template is rendered as ``hpcrl slurm render`` renders it (every point must give the
job the same shape), then made an array: ``#SBATCH --array=I,J,...%M`` over the points that
have not finished, and a block that picks array task i's point, its run directory
``SWEEP/<point>`` and its overrides. The template's lifecycle is unchanged: the warning
signal checkpoints and requeues the task, and a requeued task (or a point whose directory
holds a checkpoint when the array is submitted again) resumes its own point.
"""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from hpcrl.experiments.sweep import Sweep, SweepError
from hpcrl.slurm.render import Rendered, RenderOptions, job_shape, render
from hpcrl.slurm.templates import bash_array, load_template, set_option, set_variable

SCRIPT_NAME = "sweep.sbatch"
LOG_PATTERN = "logs/slurm-%A_%a.out"


def _same_shape(opts: RenderOptions, sweep: Sweep) -> None:
    """Every point must fit the one allocation an array gives all its tasks."""
    template = load_template(opts.template)
    config = str(sweep.config_copy) if sweep.config_copy else None
    shapes = {}
    for point in sweep.points:
        shape = job_shape(template, replace(opts, config=config,
                                            sets=tuple(sweep.point_sets(point))))
        shapes[point.name] = (shape.components, shape.scheme_sets)
    first, *others = shapes.items()
    for name, other in others:
        if other != first[1]:
            raise SweepError(f"points {first[0]} and {name} need jobs of different shapes "
                             f"(tasks or CPUs): one job array gives every task the same "
                             f"allocation; sweep such values in separate arrays")


def array_spec(indices: list[int]) -> str:
    """Sorted task indices as sbatch ``--array`` ranges: [0, 1, 2, 5] -> '0-2,5'."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _point_block(sweep: Sweep, indices: list[int]) -> list[str]:
    """The lines that pick array task i's point and say so."""
    lines = ["# rendered by `hpcrl slurm sweep`: array task i trains point i of the sweep in",
             "# HPCRL_SWEEP_DIR (its sweep.yaml lists the points); a finished point is left",
             "# as it is, and a point whose directory holds a checkpoint resumes.",
             f"HPCRL_SWEEP_DIR={shlex.quote(str(sweep.path))}",
             'case "${SLURM_ARRAY_TASK_ID:-}" in']
    for i in indices:
        point = sweep.points[i]
        lines.append(f"{i}) HPCRL_POINT={shlex.quote(point.name)}; "
                     f"{bash_array('HPCRL_POINT_SET', list(point.sets))} ;;")
    lines += ['*) echo "hpcrl-slurm: array task \'${SLURM_ARRAY_TASK_ID:-}\' is no point of '
              'the sweep in $HPCRL_SWEEP_DIR; submit this script with sbatch as it is" >&2',
              "   exit 2 ;;",
              "esac",
              'if [[ -f "$HPCRL_SWEEP_DIR/$HPCRL_POINT/eval.json" ]]; then',
              '    echo "hpcrl-slurm: point $HPCRL_POINT has finished; nothing to do" >&2',
              "    exit 0",
              "fi"]
    return lines


def render_sweep(opts: RenderOptions, sweep: Sweep, max_running: int | None = None,
                 ) -> Rendered:
    """The job-array script of ``sweep``'s unfinished points (``opts.config``, ``sets`` and
    ``run_dir`` come from the sweep); at most ``max_running`` tasks run at once."""
    indices = sweep.unfinished()
    if not indices:
        raise SweepError(f"every point of the sweep in '{sweep.path}' has finished; see them "
                         f"with hpcrl runs {sweep.path}")
    _same_shape(opts, sweep)
    first = sweep.points[indices[0]]
    log = opts.log or str(sweep.path / LOG_PATTERN)
    opts = replace(opts, config=str(sweep.config_copy) if sweep.config_copy else None,
                   sets=tuple(sweep.point_sets(first)), run_dir=None, log=log)
    rendered = render(opts)
    lines = rendered.text.splitlines()
    array = array_spec(indices) + (f"%{max_running}" if max_running else "")
    lines = set_option(lines, "array", array)
    lines = set_variable(lines, "RUN_DIR", 'RUN_DIR="$HPCRL_SWEEP_DIR/$HPCRL_POINT"  # render')
    rendered_set = bash_array("HPCRL_RENDERED_SET", list(sweep.sets))
    lines = set_variable(lines, "HPCRL_RENDERED_SET",
                         rendered_set[:-1] + (" " if sweep.sets else "")
                         + '"${HPCRL_POINT_SET[@]}")')
    at = next(i for i, line in enumerate(lines) if line.startswith("CONFIG="))
    lines[at:at] = _point_block(sweep, indices)
    header = next(i for i, line in enumerate(lines)
                  if line.startswith("# rendered by `hpcrl slurm render`:"))
    lines[header] = (f"# rendered by `hpcrl slurm sweep`: {len(indices)} of "
                     f"{len(sweep.points)} points of {sweep.path}, one array task each; task "
                     f"{indices[0]}:")
    return replace(rendered, text="\n".join(lines) + "\n")


def write_sweep_script(rendered: Rendered, sweep: Sweep) -> Path:
    """Write the array script into the sweep directory (and its log directory)."""
    (sweep.path / "logs").mkdir(parents=True, exist_ok=True)
    script = sweep.path / SCRIPT_NAME
    script.write_text(rendered.text)
    return script
