"""Serial placement: collector, gradient worker and updater in one process, in lock step.

Each role has its own copy of the actor, as it would on its own rank, and they talk only
through an :class:`~hpcrl.roles.transport.InProcessTransport`. This is the default for a
workstation run, the debugging path, and the reference the MPI placements are tested
against.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcrl.build import make_actor, make_storage, num_minibatches, rollout_layout
from hpcrl.config.schema import Config
from hpcrl.core.actor import ActorCritic
from hpcrl.core.algorithms import make_algorithm
from hpcrl.core.envs import EnvSpaces, make_vector_env
from hpcrl.roles import Collector, GradientWorker, InProcessTransport, Updater


@dataclass
class UpdateResult:
    """What one update did: env steps, finished episodes, loss terms and time split."""

    env_steps: int
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    stats: dict[str, float]
    times: dict[str, float] = field(default_factory=dict)
    policy_lag: float = 0.0
    gradient_asynchrony: float = 0.0


class SerialPlacement:
    """All three roles of one agent in this process."""

    def __init__(self, config: Config, spaces: EnvSpaces) -> None:
        self.config = config
        n = config.env.num_envs
        updater_actor = make_actor(config, spaces)
        on_nonfinite = config.train.on_nonfinite
        self.updater = Updater(make_algorithm(updater_actor, config.algo,
                                              on_nonfinite=on_nonfinite))
        storage = make_storage(config, spaces)
        self.worker = GradientWorker(make_algorithm(make_actor(config, spaces), config.algo,
                                                    on_nonfinite=on_nonfinite),
                                     storage, config.seed, n, num_minibatches(config))
        self.envs = make_vector_env(config.env, n)
        self.collector = Collector(self.envs, make_actor(config, spaces), config.env,
                                   config.algo.gamma, config.seed)
        self.rollout = rollout_layout(config, spaces, n).new()
        self.transport = InProcessTransport()
        self._publish(self.updater.weights())

    @property
    def master_actor(self) -> ActorCritic:
        """The actor whose weights the updater owns (what checkpoints save)."""
        return self.updater.algorithm.actor

    def _publish(self, weights: Any) -> None:
        self.transport.publish_weights(weights)
        latest = self.transport.latest_weights()
        self.worker.load_weights(latest)
        self.collector.load_weights(latest)

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The loss terms of the progress rows."""
        return self.worker.algorithm.stat_names

    def run_update(self, update: int, env_steps: int) -> UpdateResult:
        """Collect one rollout, compute and apply every gradient of the update."""
        t0 = time.perf_counter()
        self.transport.send_rollout(self.collector.collect(self.rollout))
        t1 = time.perf_counter()
        rollouts = self.transport.recv_rollouts(1)
        sums: dict[str, float] = {}
        count = 0
        cfg = self.config
        progress = (env_steps + cfg.algo.num_steps * cfg.env.num_envs) / cfg.train.total_env_steps
        for gradient in self.worker.gradients(rollouts, update, progress):
            self.transport.send_gradient(gradient)
            weights = self.updater.apply(self.transport.recv_gradient())
            for name, value in zip(self.worker.algorithm.stat_names, gradient.stats()):
                sums[name] = sums.get(name, 0.0) + float(value)
            count += 1
            self.transport.publish_weights(weights)
            self.worker.load_weights(self.transport.latest_weights())
        self.collector.load_weights(self.transport.latest_weights())
        t2 = time.perf_counter()
        stats = {k: v / count for k, v in sums.items()}
        stats.update(self.updater.last_stats)
        stats["skipped_updates"] = self.updater.algorithm.guard.take_skipped()
        returns, lengths = rollouts[0].finished_episodes()
        return UpdateResult(rollouts[0].valid_steps * rollouts[0].layout.num_envs,
                            returns.copy(), lengths.copy(), stats,
                            {"time_collect_s": t1 - t0, "time_compute_s": t2 - t1,
                             "time_wait_s": 0.0, "time_communicate_s": 0.0,
                             "dropped_rollouts": 0.0})

    def state_dict(self) -> dict[str, Any]:
        return {"updater": self.updater.state_dict(), "collectors": [self.collector.state_dict()]}

    def load_state_dict(self, state: dict[str, Any], actor_state: dict[str, Any]) -> list[str]:
        """Restore the roles; returns env attributes that could not be restored exactly."""
        self.master_actor.load_state_dict(actor_state)
        self.updater.load_state_dict(state["updater"])
        self._publish(self.updater.weights())
        (collector_state,) = state["collectors"]
        return self.collector.load_state_dict(collector_state)

    def close(self) -> None:
        self.envs.close()
