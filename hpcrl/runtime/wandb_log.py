"""Weights & Biases logging of the progress rows (``train.wandb``), from rank 0 only.

The run's W&B id is kept in ``RUN_DIR/wandb-id``, so a resumed run (or a requeued Slurm job)
continues the same W&B run. Rows are logged with ``env_steps`` as their x axis (a W&B
"step metric"), not as W&B's own step: after a resume the rows since the checkpoint are
written again with env steps W&B has seen, which its own step would refuse. Offline mode
(the default) writes under ``RUN_DIR/wandb``; ``wandb sync RUN_DIR/wandb/offline-run-*``
uploads it from a machine that reaches the internet.
"""
from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from typing import Any

from hpcrl.errors import ExplainedError
from hpcrl.runtime.run_dir import RunDir, write_run_file
from hpcrl.sections.schema import WandbConfig

INSTALL_HINT = 'pip install wandb (or pip install "hpcrl[wandb]")'


class WandbLog:
    """One W&B run mirroring ``progress.csv``."""

    def __init__(self, settings: WandbConfig, run: RunDir, config: dict[str, Any]) -> None:
        """The W&B run of ``run`` with ``settings`` (``train.wandb``), logging ``config``
        (the run's config as plain dicts) as the run's configuration."""
        try:
            import wandb
        except ImportError:
            raise ExplainedError(f"train.wandb.project is set but wandb cannot be imported: "
                                 f"{INSTALL_HINT}") from None
        id_path = run.path / "wandb-id"
        if id_path.is_file():
            run_id = id_path.read_text().strip()
        else:
            run_id = secrets.token_hex(4)
            write_run_file("W&B run id", id_path, run_id + "\n")
        self.run = wandb.init(project=settings.project, entity=settings.entity or None,
                              group=settings.group or None, name=run.path.name, id=run_id,
                              resume="allow", dir=str(run.path), mode=settings.mode,
                              config=config)
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")

    def log(self, row: Mapping[str, Any]) -> None:
        """One progress row (its finite numbers)."""
        self.run.log({k: v for k, v in row.items()
                      if isinstance(v, (int, float)) and math.isfinite(v)})

    def close(self) -> None:
        """End the W&B run (offline: its files are complete for ``wandb sync``)."""
        self.run.finish()
