"""What a non-finite loss term or gradient does to a gradient step (``train.on_nonfinite``).

The algorithms' own guard, so it lives with them in ``core`` (which imports nothing of the
run-time layer); the checks of env data and checkpoints are :mod:`hpcrl.runtime.finite`.
Both raise :class:`~hpcrl.errors.NonFiniteError`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from hpcrl.errors import NonFiniteError

STOP, SKIP_UPDATE = "stop", "skip_update"


class GradientGuard:
    """What a non-finite loss term or gradient does, per ``train.on_nonfinite``.

    ``skipped`` counts the gradient steps dropped since the last :meth:`take_skipped`, which
    the placements read once per update into the ``skipped_updates`` progress column.
    """

    def __init__(self, on_nonfinite: str = STOP) -> None:
        if on_nonfinite not in (STOP, SKIP_UPDATE):
            raise ValueError(f"on_nonfinite must be '{STOP}' or '{SKIP_UPDATE}', "
                             f"got {on_nonfinite!r}")
        self.on_nonfinite = on_nonfinite
        self.skipped = 0

    def check_loss(self, stats: Mapping[str, float]) -> None:
        """Under ``stop``, raise naming the first non-finite loss term; under ``skip_update``
        the gradient it makes is non-finite and :meth:`admit` drops it."""
        if self.on_nonfinite != STOP:
            return
        for name, value in stats.items():
            if not math.isfinite(value):
                raise NonFiniteError(
                    f"the loss term '{name}' is {value}; lower algo.lr or algo.max_grad_norm, "
                    f"check the rewards' scale, or set train.on_nonfinite=skip_update to drop "
                    f"such gradient steps")

    def admit(self, grad_norm: float, step: int) -> bool:
        """Whether the gradient of optimiser step ``step`` (norm ``grad_norm``) may be
        applied; a non-finite one raises under ``stop`` and is counted under ``skip_update``."""
        if math.isfinite(grad_norm):
            return True
        if self.on_nonfinite == STOP:
            raise NonFiniteError(
                f"the gradient of optimiser step {step} is non-finite (norm {grad_norm}); set "
                f"train.on_nonfinite=skip_update to drop such gradient steps")
        self.skipped += 1
        return False

    def take_skipped(self) -> int:
        """The gradient steps dropped since the last call (and reset the count)."""
        count, self.skipped = self.skipped, 0
        return count


def was_applied(stats: Mapping[str, float]) -> bool:
    """Whether the ``apply_gradients`` call that returned ``stats`` stepped the optimiser
    (a dropped step reports a non-finite ``grad_norm``)."""
    return math.isfinite(stats["grad_norm"])
