"""Non-finite values (NaN, inf) never reach the weights or a checkpoint.

One module for the concern at run time (the gradient's part is the algorithms', in
:mod:`hpcrl.numerics.gradient_guard`), so the serial and the MPI placements call the same code:

- :func:`check_env_steps`: the collectors check what their envs returned, once per rollout
  or transition chunk, on the buffers already in hand (one vectorised ``isfinite``); a
  non-finite observation or reward stops the run naming the env (its index on the
  collector and its global index) and its step. Env data is never skipped: the env is
  broken, and dropping its data would only hide that.
- :class:`~hpcrl.numerics.gradient_guard.GradientGuard` (in ``core``, where the algorithms
  that use it live): the algorithms check their loss terms (python floats they report
  anyway) and the norm of each flat gradient they apply. ``train.on_nonfinite`` decides:
  ``stop`` raises, ``skip_update`` drops that gradient step and counts it.
- :func:`check_checkpoint_state` / :func:`save_finite_checkpoint`: the last line of
  defence. A state whose weights, normaliser moments or optimiser state hold a non-finite
  value is refused, so the last good checkpoint on disk is never overwritten.
- :func:`naming_last_good`: wraps a training loop so the message of a :class:`NonFiniteError`
  ends by naming the last good checkpoint (every checkpoint on disk is finite, so it is the
  one there).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hpcrl.errors import NonFiniteError
from hpcrl.runtime.checkpoint import save_atomic


# -- env data -----------------------------------------------------------------------------
def check_env_steps(name: str, values: np.ndarray, env_offset: int, first_step: int,
                    total_envs: int, envs: Sequence[int] | np.ndarray | None = None) -> None:
    """Raise :class:`NonFiniteError` if ``values`` (steps x envs x ...) holds a NaN or inf.

    ``values[t, j]`` is what env ``envs[j]`` (default ``j``) of the collector, global index
    ``env_offset + envs[j]``, returned at its own step ``first_step + t`` (every env of a
    vector env steps together; the job steps ``total_envs`` envs per vector step). One
    vectorised check; the search for the first offending env and step runs only on failure.
    """
    if values.size == 0 or np.isfinite(values).all():
        return
    steps, count = values.shape[:2]
    finite = np.isfinite(values.reshape(steps, count, -1)).all(axis=2)
    t, j = (int(x) for x in np.argwhere(~finite)[0])  # row-major: the earliest step first
    row = values[t, j].reshape(-1)
    value = row[~np.isfinite(row)][0]
    i = int(envs[j]) if envs is not None else j
    step = first_step + t
    raise NonFiniteError(
        f"env {i} (global env index {env_offset + i}) returned a non-finite {name} ({value}) "
        f"at its step {step} (job env step ~{step * total_envs}); the env is broken: fix it "
        f"(or wrap it to end the episode) before training on it")


def check_env_rows(name: str, rows: Sequence[tuple[int, np.ndarray, np.ndarray]],
                   env_offset: int, first_step: int, total_envs: int) -> None:
    """:func:`check_env_steps` on scattered rows: ``(t, envs, values)`` entries, each the
    values ``envs`` returned at their step ``first_step + t`` (e.g. the final observations
    of the episodes that ended during a chunk, checked with the chunk)."""
    for t, envs, values in rows:
        check_env_steps(name, values[None], env_offset, first_step + t, total_envs, envs=envs)


# -- checkpoints --------------------------------------------------------------------------
def _nonfinite_entries(tree: Any, path: str, skip: tuple[str, ...]) -> Iterator[str]:
    """``path: what`` for every floating tensor, array or float in ``tree`` with a NaN/inf."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            if key not in skip:
                yield from _nonfinite_entries(value, f"{path}.{key}", skip)
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _nonfinite_entries(value, f"{path}[{i}]", skip)
    elif isinstance(tree, torch.Tensor) and tree.is_floating_point():
        bad = int((~torch.isfinite(tree)).sum())
        if bad:
            yield f"{path} ({bad} of {tree.numel()} values)"
    elif isinstance(tree, np.ndarray) and np.issubdtype(tree.dtype, np.floating):
        bad = int((~np.isfinite(tree)).sum())
        if bad:
            yield f"{path} ({bad} of {tree.size} values)"
    elif isinstance(tree, float) and not math.isfinite(tree):
        yield f"{path} ({tree})"


def check_checkpoint_state(state: Mapping[str, Any]) -> None:
    """Raise :class:`NonFiniteError` if the weights or statistics of ``state`` are not all
    finite: the policy's parameters and buffers (normaliser moments among them) and the
    learner's state (optimisers, target networks, counters), not the replay contents or the
    envs' own states (checked as they were collected; an env attribute may be inf by design).
    """
    places = [("policy.state_dict", state["policy"]["state_dict"])]
    placement = state.get("placement", {})
    for role in ("updater", "learner"):
        if placement.get(role) is not None:
            places.append((f"placement.{role}", placement[role]))
    bad = [entry for name, tree in places
           for entry in _nonfinite_entries(tree, name, skip=("replay",))]
    if bad:
        raise NonFiniteError(f"refusing to write a checkpoint with non-finite values in "
                             f"{', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


def save_finite_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """:func:`~hpcrl.runtime.checkpoint.save_atomic`, after :func:`check_checkpoint_state`."""
    check_checkpoint_state(state)
    return save_atomic(state, path)


def describe_last_good(path: str | Path) -> str:
    """Which checkpoint a run stopped by a non-finite value can go back to (the one at
    ``path``: every checkpoint written passed :func:`check_checkpoint_state`)."""
    path = Path(path)
    if not path.is_file():
        return (f"no checkpoint was written before it ({path} does not exist; "
                f"train.checkpoint_every sets how often one is)")
    try:  # mmap: only the counters are read, not the weights or the replay
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        c = state["counters"]
        at = f" (update {int(c['updates'])}, {int(c['env_steps'])} env steps)"
    except Exception:  # the path is what matters; the counters are a courtesy
        at = ""
    return f"the last good checkpoint is {path}{at}, left as it was"


@contextmanager
def naming_last_good(checkpoint_path: str | Path,
                     where: Callable[[], str] | None = None) -> Iterator[None]:
    """Run the ``with`` body; a :class:`NonFiniteError` raised in it continues with its
    message extended by ``where()`` (e.g. the update it happened in) and the last good
    checkpoint, keeping its traceback."""
    try:
        yield
    except NonFiniteError as err:
        when = f" {where()}" if where is not None else ""
        err.args = (f"training stopped{when}: {err}; {describe_last_good(checkpoint_path)}",)
        raise
