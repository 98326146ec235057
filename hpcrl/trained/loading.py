"""Load a trained actor for use outside hpcrl (where its record lies:
:mod:`hpcrl.runtime.saved_records`)."""
from __future__ import annotations

from pathlib import Path

import torch

from hpcrl.runtime.saved_records import checkpoint_file, saved_record
from hpcrl.sections.schema import Config
from hpcrl.trained.saved_policy import actor_from_saved, config_from_saved


def load_policy(path: str | Path, device: str | torch.device = "cpu",
                best: bool = False) -> torch.nn.Module:
    """The trained actor of a run directory or checkpoint file, as a ``torch.nn.Module`` on
    ``device``; with ``best``, the one that scored best in the evaluations during training
    (``train.eval_every``).

    Calling it on raw observations (one, or a batch; on the host) returns deterministic
    actions on ``device``; it normalises observations itself when the run did. The file is
    read with ``weights_only=True``. The run's components are imported by the paths it
    recorded; one from a script whose top level trains (no ``if __name__ == "__main__":``
    around its training) is refused with a
    :class:`~hpcrl.components.import_paths.PluginError` naming the fix, and nothing of that
    script runs (:mod:`hpcrl.components.scripts`).
    """
    return load_policy_and_config(path, device, best)[0]


def load_policy_and_config(path: str | Path, device: str | torch.device = "cpu",
                           best: bool = False) -> tuple[torch.nn.Module, Config]:
    """:func:`load_policy` and the run's config; ``path`` may also be a saved policy itself
    (a league's snapshot, ``RUN/league/snapshots/main-<env steps>.pt``)."""
    record = saved_record(path, best)
    return actor_from_saved(record).to(device), config_from_saved(record)


__all__ = ["checkpoint_file", "load_policy", "load_policy_and_config", "saved_record"]
