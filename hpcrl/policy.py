"""Load a trained actor for use outside hpcrl."""
from __future__ import annotations

from pathlib import Path

import torch

from hpcrl.build import actor_from_record, config_from_record
from hpcrl.config.schema import Config
from hpcrl.core.actor import ActorCritic
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint of a run directory, or ``path`` itself when it is a file."""
    path = Path(path)
    return RunDir(path).checkpoint_path if path.is_dir() else path


def load_policy(path: str | Path, device: str | torch.device = "cpu") -> ActorCritic:
    """The trained actor of a run directory or checkpoint file, as a ``torch.nn.Module`` on
    ``device``.

    Calling it on raw observations (one, or a batch; on the host) returns deterministic
    actions on ``device``; it normalises observations itself when the run did. The file is
    read with ``weights_only=True``.
    """
    return actor_from_record(load_checkpoint(checkpoint_file(path))["policy"]).to(device)


def load_policy_and_config(path: str | Path, device: str | torch.device = "cpu"
                           ) -> tuple[ActorCritic, Config]:
    """:func:`load_policy` and the run's config."""
    record = load_checkpoint(checkpoint_file(path))["policy"]
    return actor_from_record(record).to(device), config_from_record(record)
