"""Rank 0's side of evaluator ranks (``scheme.evaluators``): weights out, results in.

With evaluator ranks, rank 0's writer hands each due snapshot (every ``train.eval_every``
env steps, as its evaluation thread would take it) to :class:`RemoteEvaluations` instead
of a thread. It sends the weights to a free evaluator at once, or, while every evaluator
is busy, keeps them as the one snapshot waiting: a newer snapshot replaces it, so the
evaluators always take the newest weights when they are ready and rank 0 never waits for
them during training. Each result comes back as a small fixed record
(:data:`~hpcrl.exchange.protocol.EVAL_RESULT_FIELDS`) and goes to the run's one
:class:`~hpcrl.learning.eval_curve.EvalCurve`; the weights an evaluator played stay in its
outbox until its result arrives, so that ``best.pt`` is made from them on rank 0.

At the end (:meth:`RemoteEvaluations.close`) rank 0 sends the snapshot still waiting, then
a STOP (with the run's command: a stop before the budget leaves every rank with the same
exit status) to each evaluator, and takes every result until each evaluator said it leaves.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import numpy as np
from torch import nn

from hpcrl.comm.channel import Channel
from hpcrl.exchange.latest_weights import send_weights
from hpcrl.exchange.messages import STOP, Weights
from hpcrl.exchange.protocol import EVAL_RESULT_FIELDS, TAG_EVAL
from hpcrl.learning.eval_curve import EvalCurve, EvalPoint
from hpcrl.learning.periodic_eval import next_due


class RemoteEvaluations:
    """The evaluations during training played by evaluator ranks (rank 0 only)."""

    def __init__(self, channel: Channel, evaluators: list[int], curve: EvalCurve,
                 every: int, env_steps: int, host: nn.Module,
                 saved_policy: Callable[[nn.Module], dict[str, Any]],
                 console: IO[str] | None, command: Callable[[], int] = lambda: STOP) -> None:
        """Evaluate every ``every`` env steps on ``evaluators`` (ranks), recording into
        ``curve``; ``host``: a policy on the CPU that ``best.pt``'s weights are loaded
        into for ``saved_policy``; ``command``: the run's command bits at its end."""
        self.channel, self.curve, self.every, self.console = channel, curve, every, console
        self.host, self.saved_policy, self.command = host, saved_policy, command
        self.next_at = next_due(env_steps, every)
        self.free = list(evaluators)
        self.boxes: dict[int, Weights] = {}
        self.sends: dict[int, list[Any]] = {}
        self.points: dict[int, EvalPoint] = {}  # per evaluator: what it plays now
        self.waiting: tuple[Weights, EvalPoint] | None = None
        self.results = {rank: np.zeros(len(EVAL_RESULT_FIELDS)) for rank in evaluators}
        self.receives = {rank: channel.irecv(self.results[rank], rank, TAG_EVAL)
                         for rank in evaluators}

    def due(self, env_steps: int) -> bool:
        """Whether the run has crossed the next ``eval_every`` boundary (takes the results
        that arrived, and hands the waiting snapshot to an evaluator now free)."""
        self.poll()
        return env_steps >= self.next_at

    def submit(self, actor: nn.Module, env_steps: int, updates: int,
               wall_time_s: float) -> None:
        """Hand ``actor``'s weights as they are now to a free evaluator, or keep them as the
        snapshot waiting (replacing an older one); never waits."""
        self.next_at = next_due(env_steps, self.every)
        point = EvalPoint(env_steps, updates, wall_time_s)
        if self.waiting is None:
            self.waiting = (Weights.empty_like(actor), point)
        weights = self.waiting[0]
        weights.capture(actor, updates)
        self.waiting = (weights, point)
        self.poll()

    def poll(self) -> None:
        """Record the results that arrived; send the waiting snapshot to a free evaluator."""
        for rank, request in self.receives.items():
            if rank not in self.free and self.channel.test(request):
                self._take(rank)
        if self.waiting is not None and self.free:
            self._send(self.free.pop(0), *self.waiting)
            self.waiting = None

    def record_final(self, actor: nn.Module, env_steps: int, updates: int,
                     wall_time_s: float, result: dict[str, Any]) -> None:
        """The run's final evaluation (played on rank 0) as the curve's last row, after the
        evaluators' last results."""
        self.close()
        self.curve.add(EvalPoint(env_steps, updates, wall_time_s), result,
                       lambda: self.saved_policy(actor))

    def close(self) -> None:
        """Send the waiting snapshot, take every result still due, and tell each evaluator
        to leave (waiting for it to say it does)."""
        if not self.receives:
            return
        while self.waiting is not None:
            self._wait_one()
            self.poll()
        while len(self.free) < len(self.receives):
            self._wait_one()
        stop = Weights.empty_like(self.host).set_command(self.command() | STOP)
        for rank in list(self.receives):
            for request in send_weights(self.channel, stop, rank, params=False):
                self.channel.wait(request)
            self.channel.wait(self.receives[rank])  # its leaving (version -1)
        self.receives.clear()

    def _wait_one(self) -> None:
        """Wait for the result of one busy evaluator and record it."""
        busy = [r for r in self.receives if r not in self.free]
        index, _ = self.channel.wait_any([self.receives[r] for r in busy])
        self._take(busy[index])

    def _send(self, rank: int, weights: Weights, point: EvalPoint) -> None:
        """Send ``weights`` (the run at ``point``) to the free evaluator ``rank``."""
        for request in self.sends.get(rank, []):
            self.channel.wait(request)  # (taken already: its result came back)
        box = self.boxes.get(rank)
        box = self.boxes[rank] = weights.copy() if box is None else box.copy_from(weights)
        self.points[rank] = point
        self.sends[rank] = send_weights(self.channel, box, rank)

    def _take(self, rank: int) -> None:
        """Record evaluator ``rank``'s result; it is free again."""
        values = dict(zip(EVAL_RESULT_FIELDS, self.results[rank].tolist(), strict=True))
        self.receives[rank] = self.channel.irecv(self.results[rank], rank, TAG_EVAL)
        self.free.append(rank)
        result = {"mean_return": values["mean_return"], "std_return": values["std_return"],
                  **{key: int(values[key])
                     for key in ("episodes", "truncated", "max_episode_steps")}}
        box = self.boxes[rank]
        self.curve.add(self.points.pop(rank), result, lambda: self._best_policy(box))

    def _best_policy(self, box: Weights) -> dict[str, Any]:
        """The saved record of the weights in ``box`` (an evaluator's last played)."""
        box.load_into(self.host)
        return self.saved_policy(self.host)
