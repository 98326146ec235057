"""Weights delivery: a learner's new versions to whoever acts with them.

Every learner publishes the same way: after each update (or training round) it hands its
sync the policy module and its version, with the command of the run's decision (checkpoint,
stop) when there is one. What happens to them depends on where the collectors act:

* :class:`SharedInPlace`: the collector acts with the learner's very module (one process,
  on the CPU): only the version changes hands, no parameter is copied;
* :class:`CopyInProcess`: the collector holds its own copy in this process (a learner on a
  GPU, collectors on the CPU): the parameters are copied into it;
* across ranks, messages: :class:`~hpcrl.exchange.latest_weights.LatestWeights`
  (newest-weights delivery to asynchronous collectors, never waiting for one) and
  :class:`~hpcrl.exchange.latest_weights.BroadcastWeights` (every synchronous collector
  takes each version, with its command).

All of them implement :class:`WeightsSync`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from torch import nn

from hpcrl.exchange.messages import Weights


class WeightsSync(Protocol):
    """Where a learner's new versions go."""

    def publish(self, policy: nn.Module, version: int, command: int = 0,
                block: bool = False) -> None:
        """``policy`` is now version ``version``, carrying ``command`` (``block``: delivered
        to every collector before this returns, as a command must be)."""
        ...

    def push(self, block: bool = False) -> None:
        """Deliver the newest version to the collectors free to take it."""
        ...

    def drain(self) -> None:
        """Wait until every message sent was taken."""
        ...


class SharedInPlace:
    """A collector that acts with the learner's very module: each version is just noted
    (``follow(version)``); nothing crosses and nothing is copied."""

    def __init__(self, follow: Callable[[int], None]) -> None:
        self.follow = follow

    def publish(self, policy: nn.Module, version: int, command: int = 0,
                block: bool = False) -> None:
        """Tell the collector its module is now ``version``."""
        self.follow(version)

    def push(self, block: bool = False) -> None:
        """Nothing waits to be delivered."""

    def drain(self) -> None:
        """Nothing is in flight."""


class CopyInProcess:
    """A collector in this process with a module of its own: each version is copied into
    it (``load(weights)``) through one message buffer."""

    def __init__(self, policy: nn.Module, load: Callable[[Weights], None]) -> None:
        self.message = Weights.empty_like(policy)
        self.load = load

    def publish(self, policy: nn.Module, version: int, command: int = 0,
                block: bool = False) -> None:
        """Copy ``policy``'s parameters into the collector's module."""
        self.load(self.message.capture(policy, version, command))

    def push(self, block: bool = False) -> None:
        """Nothing waits to be delivered."""

    def drain(self) -> None:
        """Nothing is in flight."""
