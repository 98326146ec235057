"""The layout of a run directory.

    RUN_DIR/
      config.yaml          the resolved config (what `--resume` trains on)
      progress.csv         one row per update
      tensorboard/         event files (when tensorboard is installed)
      checkpoints/last.pt  full training state, replaced atomically
      eval.json            deterministic evaluation at the end of training
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from hpcrl.config.schema import Config


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def progress_path(self) -> Path:
        return self.path / "progress.csv"

    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoints" / "last.pt"

    @property
    def eval_path(self) -> Path:
        return self.path / "eval.json"


def default_run_dir(config: Config, root: Path = Path("runs")) -> Path:
    """``runs/<algo>-<env>-<date>-<time>``, made unique with a suffix if it exists."""
    env = config.env.id.rsplit(":", 1)[-1].replace("/", "_")
    base = root / f"{config.algo.name}-{env}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        path = base.with_name(f"{base.name}-{n}")
        n += 1
    return path
