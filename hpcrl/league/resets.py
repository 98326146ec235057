"""An exploiter going back to its start: AlphaStar's reset of main and league exploiters.

When a snapshot of a policy with ``env.league.reset_fraction`` joins the league, its
:class:`~hpcrl.league.snapshot_hook.SnapshotHook` may ask for a reset. The run's roles then
end after that update (as a PBT member's do for a copy), :func:`reset_checkpoint` rewrites
its checkpoint, and the run goes on from it: the initial weights that
:func:`save_initial_weights` kept when the run first started, the optimiser's moments and
step count cleared; its counters, episodes, envs, generators, normalisation statistics and
schedule progress stay, so the league, its logs and the budget go on as before. The
snapshot just published keeps the weights the exploiter had reached.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint, save_atomic

INITIAL_WEIGHTS = "initial-weights.pt"  # in the run directory
# the statistics of the observation and return normalisers, which a reset keeps
_NORMALISERS = ("obs_rms.", "ret_rms.")


def initial_weights_path(run_dir: Path) -> Path:
    """Where a run keeps the weights it started from."""
    return Path(run_dir) / INITIAL_WEIGHTS


def save_initial_weights(actor: nn.Module, run_dir: Path) -> Path:
    """Keep ``actor``'s weights as the run's start (written once: a resumed run keeps the
    file of its first start)."""
    path = initial_weights_path(run_dir)
    if not path.exists():
        state = {k: v.detach().cpu().clone() for k, v in actor.state_dict().items()}
        save_atomic({"state_dict": state}, path)
    return path


def reset_checkpoint(checkpoint: Path, initial: Path) -> None:
    """Make the checkpoint at ``checkpoint`` go on from the initial weights at ``initial``
    (see the module); replaced atomically: a kill leaves the old checkpoint or the new."""
    state = load_checkpoint(checkpoint)
    start = load_checkpoint(initial)["state_dict"]
    weights = state["policy"]["state_dict"]
    for key, value in start.items():
        if not key.startswith(_NORMALISERS):
            weights[key] = value
    optimiser = _optimiser_state(state, checkpoint)
    for key, value in list(optimiser.items()):
        if isinstance(value, torch.Tensor):
            optimiser[key] = torch.zeros_like(value)
        elif key == "steps":
            optimiser[key] = 0
    save_atomic(state, checkpoint)


def _optimiser_state(state: dict[str, Any], path: Path) -> dict[str, Any]:
    """The optimiser's state in a checkpoint of the run's rank 0: its updater's algorithm's
    (or its learner's)."""
    updater = state.get("placement", {}).get("updater", {})
    for holder in (updater, updater.get("learner", {})):
        algorithm = holder.get("algorithm") if isinstance(holder, dict) else None
        if isinstance(algorithm, dict) and isinstance(algorithm.get("optimizer"), dict):
            found: dict[str, Any] = algorithm["optimizer"]
            return found
    raise CheckpointError(f"{path} holds no optimiser state where rank 0 keeps it: is it a "
                          "checkpoint of an actor-critic's league run?")
