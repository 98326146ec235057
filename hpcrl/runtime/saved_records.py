"""Where a run's saved policy lies: the checkpoint file of a run directory (its best policy's
with ``best``) and the saved-policy record inside any checkpoint or snapshot file. Below the
loaders that rebuild an actor from it (:mod:`hpcrl.trained.loading`), so that the config's
checks can read a record without importing what builds actors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.runtime.run_dir import RunDir


def checkpoint_file(path: str | Path, best: bool = False) -> Path:
    """The checkpoint of a run directory (its best policy with ``best``), or ``path``
    itself when it is a file."""
    path = Path(path)
    if not path.is_dir():
        if best:
            raise CheckpointError(f"best=True / --best takes a run directory, not the file "
                                  f"'{path}'")
        return path
    run = RunDir(path)
    if best and not run.best_path.is_file():
        raise CheckpointError(f"'{path}' has no {run.best_path.relative_to(path)}: a run keeps "
                              f"its best policy when trained with train.eval_every > 0")
    return run.best_path if best else run.checkpoint_path


def saved_record(path: str | Path, best: bool = False) -> dict[str, Any]:
    """The saved policy (:func:`~hpcrl.trained.saved_policy.saved_policy`'s record) of a run
    directory, a checkpoint file or a saved policy file (a league's snapshot)."""
    saved = load_checkpoint(checkpoint_file(path, best))
    return saved if "state_dict" in saved and "config" in saved else saved["policy"]
