"""The in-process transport: mailboxes that connect roles living in one process.

It carries the same messages an MPI transport carries between ranks. Messages are passed
by reference: a sender must not refill a message before its receiver has consumed it,
which the serial placement's lock-step order guarantees.
"""
from __future__ import annotations

from collections import deque
from typing import Deque, Optional

from hpcrl.core.rollout import Rollout
from hpcrl.roles.messages import Gradient, Weights


class InProcessTransport:
    """Rollouts and gradients queue in order; weights are a single latest version."""

    def __init__(self) -> None:
        self._rollouts: Deque[Rollout] = deque()
        self._gradients: Deque[Gradient] = deque()
        self._weights: Optional[Weights] = None

    def send_rollout(self, rollout: Rollout) -> None:
        self._rollouts.append(rollout)

    def recv_rollouts(self, count: int) -> list[Rollout]:
        if len(self._rollouts) < count:
            raise RuntimeError(f"{count} rollouts requested, {len(self._rollouts)} waiting")
        return [self._rollouts.popleft() for _ in range(count)]

    def send_gradient(self, gradient: Gradient) -> None:
        self._gradients.append(gradient)

    def recv_gradient(self) -> Gradient:
        if not self._gradients:
            raise RuntimeError("no gradient waiting")
        return self._gradients.popleft()

    def publish_weights(self, weights: Weights) -> None:
        self._weights = weights

    def latest_weights(self) -> Weights:
        if self._weights is None:
            raise RuntimeError("no weights published yet")
        return self._weights
