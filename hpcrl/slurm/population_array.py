"""``hpcrl slurm pbt``: the members of a population as one Slurm job array.

The template is rendered as ``hpcrl slurm render`` renders it for the population's config
(every member has the same shape: one config), then made an array: ``#SBATCH
--array=I,J,...%M`` over the members that have not finished, ``RUN_DIR`` the member's own
run directory (``POP/member-KK``: the template's markers, ``stopped``, ``trained`` and
``refused``, are the member's), and a step that runs ``hpcrl pbt --run-dir POP --member K``
whether it starts or resumes (a member resumes from its own checkpoint by itself). The
template's lifecycle is unchanged: the warning signal checkpoints and requeues the task, a
requeued task resumes its member, and a member lost or late stops no other task.
"""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from hpcrl.runtime.population_dir import PopulationDir
from hpcrl.slurm.render import Rendered, RenderOptions, render
from hpcrl.slurm.sweep import array_spec
from hpcrl.slurm.templates import TemplateError, set_option, set_variable

__all__ = ["LOG_PATTERN", "SCRIPT_NAME", "render_population", "write_population_script"]

SCRIPT_NAME = "pbt.sbatch"
LOG_PATTERN = "logs/slurm-%A_%a.out"
MEMBER = '"$HPCRL_POP_DIR" --member "$SLURM_ARRAY_TASK_ID"'


def _member_block(root: Path, members: int) -> list[str]:
    """The lines that name array task k's member and leave a finished one as it is."""
    return ["# rendered by `hpcrl slurm pbt`: array task k trains member k of the population",
            "# in HPCRL_POP_DIR (its pbt-config.yaml is the config every member trains); a",
            "# finished member is left as it is, one with a checkpoint resumes.",
            f"HPCRL_POP_DIR={shlex.quote(str(root))}",
            'if [[ ! "${SLURM_ARRAY_TASK_ID:-}" =~ ^[0-9]+$ ]] || '
            f'((SLURM_ARRAY_TASK_ID >= {members})); then',
            '    echo "hpcrl-slurm: array task \'${SLURM_ARRAY_TASK_ID:-}\' is no member of the '
            'population in $HPCRL_POP_DIR; submit this script with sbatch as it is" >&2',
            "    exit 2",
            "fi",
            'HPCRL_MEMBER_DIR="$HPCRL_POP_DIR/member-$(printf %02d "$SLURM_ARRAY_TASK_ID")"',
            'if [[ -f "$HPCRL_MEMBER_DIR/eval.json" ]]; then',
            '    echo "hpcrl-slurm: member $SLURM_ARRAY_TASK_ID has finished; nothing to do" >&2',
            "    exit 0",
            "fi"]


def _member_step(lines: list[str]) -> list[str]:
    """The template's ``next_step`` made to run the array task's member, fresh or resumed;
    the hints that say how to resume by hand name the member too."""
    start = next((i for i, line in enumerate(lines) if line.startswith("next_step() {")), None)
    if start is None:
        raise TemplateError("the template has no next_step() function for hpcrl slurm pbt to "
                            "make a member's step: render one of sync, async or central")
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    step = ["next_step() {  # (a member starts, or resumes from its own checkpoint)",
            f'    step_command "${{hpcrl_cmd[@]}}" pbt --run-dir {MEMBER}',
            "}"]
    by_hand = "pbt --run-dir ${HPCRL_POP_DIR} --member ${SLURM_ARRAY_TASK_ID}"
    rest = [line.replace("train --resume ${RUN_DIR}", by_hand) for line in lines[end + 1:]]
    return lines[:start] + step + rest


def render_population(opts: RenderOptions, population: PopulationDir, members: int,
                      todo: list[int], max_running: int | None = None) -> Rendered:
    """The job-array script of ``population`` (``members`` members, ``todo`` those left to
    train); at most ``max_running`` at once."""
    root = population.path
    log = opts.log or str(root / LOG_PATTERN)
    opts = replace(opts, config=str(population.config_path), sets=(), run_dir=None, log=log)
    rendered = render(opts)
    lines = rendered.text.splitlines()
    array = array_spec(todo) + (f"%{max_running}" if max_running else "")
    lines = set_option(lines, "array", array)
    lines = set_variable(lines, "RUN_DIR", 'RUN_DIR="$HPCRL_MEMBER_DIR"  # render')
    at = next(i for i, line in enumerate(lines) if line.startswith("CONFIG="))
    lines[at:at] = _member_block(root, members)
    lines = _member_step(lines)
    header = next(i for i, line in enumerate(lines)
                  if line.startswith("# rendered by `hpcrl slurm render`:"))
    lines[header] = (f"# rendered by `hpcrl slurm pbt`: {len(todo)} of {members} members of "
                     f"{root}, one array task each; the job of each:")
    return replace(rendered, text="\n".join(lines) + "\n")


def write_population_script(rendered: Rendered, population: PopulationDir) -> Path:
    """Write the array script into the population's directory (and its log directory)."""
    population.logs.mkdir(parents=True, exist_ok=True)
    script = population.path / SCRIPT_NAME
    script.write_text(rendered.text)
    return script
