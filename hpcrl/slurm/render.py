"""Fill a template from a config: ``hpcrl slurm render`` (and ``submit``, which renders first).

Rendering sets the #SBATCH task counts, GPUs and CPUs from :func:`~hpcrl.slurm.sizing.size_job`
(the rank table of ``hpcrl plan``), the time limit and warning signal, the site's partition,
account and QoS, and writes the config, run directory, launcher and the scheme overrides into
the script, as plain values: what the file says is what the job runs.
"""
from __future__ import annotations

import os
import re
import shlex
import textwrap
from dataclasses import dataclass, field

from hpcrl.config.loader import ConfigError
from hpcrl.slurm.mpi_plugin import mpi_library_version, template_launch
from hpcrl.slurm.sizing import JobShape, size_job
from hpcrl.slurm.survival import ULFM_LAUNCH, lost_collector_line, starts_ulfm
from hpcrl.slurm.templates import (
    Template,
    TemplateError,
    bash_array,
    get_option,
    load_template,
    parse_minutes,
    set_option,
    set_variable,
)

DEFAULT_SIGNAL_LEAD_S = 90
SIGNAL = re.compile(r"^(?:[A-Z]+:)?\w+@(\d+)$")


@dataclass
class RenderOptions:
    """What ``hpcrl slurm render`` was asked for; None keeps the template's value."""

    template: str
    config: str | None = None
    sets: tuple[str, ...] = ()
    nodes: int | None = None
    gpus_per_node: int | None = None
    time_minutes: int | None = None
    signal_lead_s: int | None = None
    run_dir: str | None = None
    log: str | None = None
    partition: str | None = None
    collector_partition: str | None = None
    account: str | None = None
    qos: str | None = None
    launch: str | None = None
    job_name: str | None = None
    cpus_per_task: int | None = None


@dataclass
class Rendered:
    """The batch script, the job it runs, how its ranks start, and advice for the user."""

    text: str
    shape: JobShape
    launch_note: str
    warnings: list[str] = field(default_factory=list)


def _int_option(template: Template, key: str) -> int:
    value = get_option(template.lines, key)
    if value is None or not value.isdigit():
        raise TemplateError(f"'{template.path}' needs '#SBATCH --{key}=N' in its first "
                            f"component (the default of --{key.replace('ntasks-', 'gpus-')})")
    return int(value)


def _time_and_lead(template: Template, opts: RenderOptions) -> tuple[int, int]:
    time = opts.time_minutes
    if time is None:
        value = get_option(template.lines, "time")
        time = parse_minutes(value) if value else 60
    lead = opts.signal_lead_s
    if lead is None:
        match = SIGNAL.match(get_option(template.lines, "signal") or "")
        lead = int(match.group(1)) if match else DEFAULT_SIGNAL_LEAD_S
    if time < 1 or lead < 1:
        raise ConfigError("--time and --signal-lead must be >= 1")
    if lead >= time * 60:
        raise ConfigError(f"--signal-lead {lead} s is not shorter than --time {time} min: the "
                          f"warning would come before the job has run; lower --signal-lead or "
                          f"raise --time")
    return time, lead


def _launch(template: Template, launch: str | None) -> tuple[str | None, str]:
    """The launcher to write into the script (None: the template picks it when the job
    starts) and a line saying what it is and why."""
    if launch is None:
        choice = template_launch(template.kind)
        if choice.plugin is None:
            return None, (f"launch: chosen when the job starts, by `hpcrl slurm launcher` "
                          f"({choice.reason})")
        return choice.command, f"launch: {choice.command} ({choice.reason}; --launch overrides)"
    words = shlex.split(launch)
    if not words:
        raise ConfigError("--launch is empty; use e.g. 'srun --mpi=pmix' or 'mpirun', or leave "
                          "it out for srun with the plugin of mpi4py's MPI library")
    name = os.path.basename(words[0])
    if template.kind == "async" and name != "srun" and not starts_ulfm(launch):
        raise ConfigError(f"--launch '{launch}': the async template is a heterogeneous job, "
                          f"whose two components start as one MPI world under srun ('srun "
                          f"--mpi=pmix' for Open MPI, 'srun --mpi=pmi2' for MPICH) or under "
                          f"Open MPI 5's '{ULFM_LAUNCH}'; or leave --launch out to get the "
                          f"launcher of mpi4py's MPI library")
    return launch, f"launch: {launch} (--launch)"


def _abspath(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _sbatch_lines(lines: list[str], shape: JobShape, opts: RenderOptions, time: int,
                  lead: int) -> list[str]:
    gpu, cpu = shape.components[0], shape.components[1:]
    values: list[tuple[str, str | None, int]] = [
        ("nodes", str(gpu.nodes), 0), ("ntasks-per-node", str(gpu.tasks_per_node), 0),
        ("cpus-per-task", str(gpu.cpus_per_task), 0), ("time", str(time), 0),
        ("signal", f"B:USR1@{lead}", 0), ("requeue", None, 0)]
    if shape.template == "async":
        values.append(("gpus-per-task", "1", 0))
    else:
        values.append(("gpus-per-node", str(gpu.tasks_per_node), 0))
    for part in cpu:
        values += [("ntasks", str(part.tasks), 1), ("cpus-per-task", str(part.cpus_per_task), 1)]
        if opts.collector_partition:
            values.append(("partition", opts.collector_partition, 1))
    site = (("job-name", opts.job_name), ("partition", opts.partition),
            ("account", opts.account), ("qos", opts.qos),
            ("output", _abspath(opts.log) if opts.log else None))
    values += [(key, value, 0) for key, value in site if value]
    for key, value, component in values:
        lines = set_option(lines, key, value, component)
    return lines


def _variables(lines: list[str], shape: JobShape, opts: RenderOptions,
               launch: str | None) -> list[str]:
    config = shlex.quote(_abspath(opts.config)) if opts.config else '""'
    lines = set_variable(lines, "CONFIG", f"CONFIG={config}  # render")
    if opts.run_dir:
        lines = set_variable(lines, "RUN_DIR",
                             f"RUN_DIR={shlex.quote(_abspath(opts.run_dir))}  # render")
    if launch is not None:
        lines = set_variable(lines, "HPCRL_LAUNCH",
                             f"HPCRL_LAUNCH={shlex.quote(launch)}  # render")
    lines = set_variable(lines, "HPCRL_SCHEME", bash_array("HPCRL_SCHEME",
                                                           list(shape.scheme_sets)))
    return set_variable(lines, "HPCRL_RENDERED_SET", bash_array("HPCRL_RENDERED_SET",
                                                                list(opts.sets)))


def _header(shape: JobShape, opts: RenderOptions, launch_note: str,
            launch: str | None) -> list[str]:
    plan = ["hpcrl", "plan", *([_abspath(opts.config)] if opts.config else [])]
    for item in (*opts.sets, *shape.scheme_sets):
        plan += ["--set", item]
    return ["# rendered by `hpcrl slurm render`:", f"#   {shape.summary()}",
            f"#   {launch_note}", *_survival(shape, launch),
            f"#   rank table: {shlex.join(plan)}"]


def _survival(shape: JobShape, launch: str | None) -> list[str]:
    """The comment lines on what a lost collector does to the rendered job (none for a job
    without collector ranks), wrapped at 96 characters."""
    line = lost_collector_line(shape.scheme, mpi_library_version()[0],
                               launch=launch if launch is not None else "srun")
    if line is None:  # (with launch None the job picks srun: the library is unknown)
        return []
    return [f"#   {part}" for part in textwrap.wrap(f"if a collector rank dies, {line}", 92,
                                                    subsequent_indent="  ")]


def job_shape(template: Template, opts: RenderOptions) -> JobShape:
    """The job ``opts`` renders from ``template``: its nodes and GPUs (given, or the
    template's), sized by the config's rank table."""
    nodes = opts.nodes if opts.nodes is not None else _int_option(template, "nodes")
    gpus = (opts.gpus_per_node if opts.gpus_per_node is not None
            else _int_option(template, "ntasks-per-node"))
    return size_job(template.kind, opts.config, opts.sets, nodes, gpus, opts.cpus_per_task)


def render(opts: RenderOptions) -> Rendered:
    """The batch script for ``opts``; raises ConfigError or TemplateError naming the fix."""
    template = load_template(opts.template)
    shape = job_shape(template, opts)
    time, lead = _time_and_lead(template, opts)
    launch, launch_note = _launch(template, opts.launch)
    lines = _sbatch_lines(list(template.lines), shape, opts, time, lead)
    lines = _variables(lines, shape, opts, launch)
    mark = next(i for i, line in enumerate(lines) if line.startswith("# hpcrl-template:"))
    lines[mark + 1:mark + 1] = _header(shape, opts, launch_note, launch)
    warnings = []
    if shape.device == "cpu":
        warnings.append("train.device is 'cpu': the job's GPUs stay idle; --set "
                        "train.device=auto puts the learners on them")
    return Rendered("\n".join(lines) + "\n", shape, launch_note, warnings)
