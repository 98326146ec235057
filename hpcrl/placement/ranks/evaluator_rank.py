"""An evaluator rank (``scheme.evaluators``): plays evaluation episodes beside training.

It waits for rank 0's weights (:mod:`~hpcrl.placement.evaluators` sends them each time
``train.eval_every`` env steps passed and this rank is free), plays ``train.eval_episodes``
deterministic episodes of the run's env with them (the same evaluation as the final one,
:func:`hpcrl.learning.evaluation.evaluate`), and sends the result back as a small fixed
record; rank 0 keeps ``eval.csv`` and ``best.pt``. A STOP in the weights' header (the end of
the job, or a stop before it) makes it say it leaves and return. Nothing the learners do
waits for it.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from torch import nn

from hpcrl.comm.channel import Channel
from hpcrl.exchange.latest_weights import PLAIN, ParamsReceiver
from hpcrl.exchange.messages import ENV_FAILED, PREEMPTED, STOP, Weights
from hpcrl.exchange.protocol import EVAL_RESULT_FIELDS, TAG_EVAL, TAG_WEIGHTS
from hpcrl.learning.evaluation import evaluate
from hpcrl.learning.run_writer import WrittenConfig


class EvaluatorJob(Protocol):
    """What an evaluator rank reads of its job: the channel to rank 0, what the run's
    evaluations read of the config (its env, train section and seed: the writer's
    :class:`~hpcrl.learning.run_writer.WrittenConfig`) and a fresh acting policy on the CPU
    to load the weights into."""

    @property
    def channel(self) -> Channel:
        """The channel to rank 0."""

    def written_config(self) -> WrittenConfig:
        """What the writer reads of the config: its env, train section and seed."""

    def new_policy(self) -> nn.Module:
        """A fresh acting policy of the job's algorithm, on the CPU."""


class EvaluatorRank:
    """Evaluates each version rank 0 sends until told to stop."""

    def __init__(self, job: EvaluatorJob) -> None:
        self.channel, self.config = job.channel, job.written_config()
        self.policy = job.new_policy()
        self.weights = Weights.empty_like(self.policy)
        self.params = ParamsReceiver(self.channel, self.weights, 0, PLAIN)
        self.evaluations = 0
        self.preempted = self.env_failed = False  # (what JobRun reads of every role)
        self.actor = self.policy

    def run(self) -> None:
        """Evaluate what arrives; return once a STOP came (after saying so to rank 0)."""
        result = np.zeros(len(EVAL_RESULT_FIELDS))
        while True:
            self.channel.wait(self.channel.irecv(self.weights.header.data, 0, TAG_WEIGHTS))
            if self.weights.command & STOP:  # (a stop before the budget: every rank's status)
                self.preempted = bool(self.weights.command & PREEMPTED)
                self.env_failed = bool(self.weights.command & ENV_FAILED)
                result[:] = -1.0
                self.channel.send(result, 0, TAG_EVAL)
                return
            self.channel.wait(self.params.post())
            self.params.unpack()
            self.weights.load_into(self.policy)
            result[:] = self.play()
            self.channel.send(result, 0, TAG_EVAL)
            self.evaluations += 1

    def play(self) -> list[float]:
        """The evaluation of the weights just loaded, as the result record's values."""
        c = self.config
        played: dict[str, Any] = evaluate(self.policy, c.env, c.train.eval_episodes, c.seed,
                                          c.train.eval_max_episode_steps)
        return [float(self.weights.version), played["mean_return"], played["std_return"],
                float(played["episodes"]), float(played["truncated"]),
                float(played["max_episode_steps"])]
