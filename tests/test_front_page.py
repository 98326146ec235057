"""The README's front-page commands as a newcomer copies them: every file they name exists,
and the quick ones run as written (the quick start itself is run by .ci/run, line by line)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
HPCRL = [sys.executable, "-m", "hpcrl.cli"]


def front_page_commands() -> list[str]:
    """The command lines of the bash blocks under "## Three ways to run it" (comments
    dropped)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Three ways to run it", 1)[1].split("\n## ", 1)[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        lines += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return lines


def test_every_file_the_front_page_names_exists():
    commands = front_page_commands()
    assert any(c.startswith("hpcrl slurm render") for c in commands), commands
    named = [w for c in commands for w in shlex.split(c) if w.endswith((".yaml", ".py"))]
    assert named and all((ROOT / w).is_file() for w in named), named


def test_the_front_pages_plan_and_slurm_render_run_as_written(tmp_path):
    for command in front_page_commands():
        words = shlex.split(command)
        if words[:2] not in (["hpcrl", "plan"], ["hpcrl", "slurm"]):
            continue  # training and sbatch: run elsewhere (tests/mpi, tests/slurm)
        if "-o" in words:  # the script goes to a scratch folder instead of the checkout
            words[words.index("-o") + 1] = str(tmp_path / words[words.index("-o") + 1])
        done = subprocess.run(HPCRL + words[1:], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)
        assert done.returncode == 0, (command, done.stderr[-1500:])
        assert "warning" not in done.stderr, (command, done.stderr)  # e.g. idle GPUs
        if "-o" in words:
            script = Path(words[words.index("-o") + 1]).read_text()
            assert "#SBATCH --nodes=4" in script and "--gpus-per-node=8" in script, script[:800]
