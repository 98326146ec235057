"""The docs' Python API script (docs/components.md: Writing your own components) as a user
runs it: written to a directory as ``myapi.py``, with or without its ``if __name__ == "__main__":``
guard, and started with ``python myapi.py`` (or under ``mpiexec``)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

README = Path(__file__).parents[1] / "docs" / "components.md"  # where the script is shown
INTRO = "A script that defines its own components and trains them, `myapi.py`"
GUARD = 'if __name__ == "__main__":'
README_SETS = 'sets=["train.total_env_steps=40000"]'
TINY = ["train.total_env_steps=1024", "env.num_envs=4", "algo.num_steps=16",
        "algo.ppo.minibatch_size=32", "algo.ppo.num_epochs=2", "train.eval_episodes=2",
        "train.tensorboard=false", "train.log_interval_s=60"]


def readme_script(guarded: bool = True, sets: list[str] | None = None) -> str:
    """The README's script, trained with ``sets`` (default :data:`TINY`) instead of its 40k
    steps; ``guarded=False``: the training moved out of the guard to the top level."""
    text = README.read_text()
    block = re.search(re.escape(INTRO) + r".*?```python\n(.*?)```", text, re.S)
    assert block, f"{README} has no python block after {INTRO!r}"
    script = block.group(1)
    assert README_SETS in script and GUARD in script, "the README's script changed shape"
    script = script.replace(README_SETS, f"sets={sets if sets is not None else TINY!r}")
    if not guarded:
        head, _, body = script.partition(GUARD)
        head, _, _ = head.rpartition("\n")  # the guard's line, with its comment, goes
        body = body.partition("\n")[2]
        script = f"{head}\n{textwrap.dedent(body)}"
    return script


def write_script(directory: Path, guarded: bool = True,
                 sets: list[str] | None = None) -> Path:
    """``directory/myapi.py``: :func:`readme_script`."""
    path = directory / "myapi.py"
    path.write_text(readme_script(guarded, sets))
    return path


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: one thread, and ``extra`` (e.g. PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def run_script(directory: Path, launcher: tuple[str, ...] = (),
               timeout: float = 150) -> subprocess.CompletedProcess:
    """``[launcher] python myapi.py`` in ``directory``."""
    return subprocess.run([*launcher, sys.executable, "myapi.py"], cwd=directory,
                          capture_output=True, text=True, timeout=timeout, env=user_env())


def runs(directory: Path) -> list[Path]:
    """The run directories a script made in ``directory`` (under its default ``runs/``)."""
    root = directory / "runs"
    return sorted(root.iterdir()) if root.is_dir() else []
