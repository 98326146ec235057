"""Serial placement of an off-policy agent: collector and learner in one process.

One update collects ``algo.num_steps`` steps of every env, in chunks that end where a
training round is due (every ``replay.train_freq`` steps per env); each chunk goes into the
learner's replay, each round takes ``replay.gradient_steps`` gradient steps and publishes the
policy to the collector. Collector and learner hold separate copies of the policy and
exchange only flat buffers (transition chunks and weights), as they would on two ranks.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from torch import nn

from hpcrl.config.schema import Config
from hpcrl.core.algorithms.offpolicy import make_offpolicy_algorithm, make_policy
from hpcrl.core.envs import EnvSpaces, make_vector_env
from hpcrl.placement.serial import UpdateResult
from hpcrl.roles.replay_learner import ReplayLearner, make_replay
from hpcrl.roles.transition_collector import TransitionCollector, chunk_layout
from hpcrl.runtime.cpu import retain_freed_memory
from hpcrl.runtime.devices import pick_device


class SerialOffPolicyPlacement:
    """The collector and the learner of one off-policy agent in this process."""

    def __init__(self, config: Config, spaces: EnvSpaces) -> None:
        self.config = config
        retain_freed_memory()  # the learner's activations are reused, not re-faulted
        n = config.env.num_envs
        self.num_envs = n
        algorithm = make_offpolicy_algorithm(config, spaces,
                                             pick_device(config.train.device, None))
        replay = make_replay(config, spaces.obs_shape, spaces.action_shape, spaces.discrete,
                             spaces.obs_format.dtype, spaces.obs_format, streams=n)
        self.learner = ReplayLearner(algorithm, replay, config)
        self.envs = make_vector_env(config.env, n)
        self.collector = TransitionCollector(self.envs, make_policy(config, spaces), config)
        self.chunk = chunk_layout(config, spaces.obs_shape, spaces.action_shape, n,
                                  spaces.obs_format.dtype).new()
        self.since_round = 0  # steps per env collected since the last training round
        self.job_env_steps = 0
        self.collector.load_weights(self.learner.weights())

    @property
    def master_actor(self) -> nn.Module:
        """The learner's policy (what checkpoints save and evaluation runs)."""
        return self.learner.algorithm.policy

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The loss terms of the progress rows (the learner's)."""
        return self.learner.stat_names


    def _round_size(self) -> int:
        steps = self.config.replay.gradient_steps
        return steps if steps >= 0 else self.config.replay.train_freq * self.num_envs

    def run_update(self, update: int, env_steps: int) -> UpdateResult:
        """Collect ``algo.num_steps`` steps per env, training whenever a round is due."""
        freq = self.config.replay.train_freq
        left = self.config.algo.num_steps
        self.job_env_steps = env_steps
        returns: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        sums: dict[str, float] = {}
        rounds = gradient_steps = 0
        collect_s = compute_s = 0.0
        while left > 0:
            steps = min(left, freq - self.since_round)
            t0 = time.perf_counter()
            chunk = self.collector.collect(self.chunk, steps, self.job_env_steps)
            self.learner.add(chunk)
            t1 = time.perf_counter()
            collect_s += t1 - t0
            ret, length = chunk.finished_episodes()
            returns.append(ret.astype(np.float64))
            lengths.append(length.astype(np.float64))
            self.job_env_steps += steps * self.num_envs
            self.since_round += steps
            left -= steps
            if self.since_round == freq:
                self.since_round = 0
                if self.learner.ready(self.job_env_steps):
                    stats = self.learner.train(self._round_size(), self.job_env_steps)
                    self.collector.load_weights(self.learner.weights())
                    rounds += 1
                    gradient_steps += self._round_size()
                    for name, value in stats.items():
                        sums[name] = sums.get(name, 0.0) + value
                compute_s += time.perf_counter() - t1
        stats = {name: value / rounds for name, value in sums.items()} if rounds else {}
        env_steps = self.config.algo.num_steps * self.num_envs
        stats["replay_ratio"] = gradient_steps / env_steps
        stats["skipped_updates"] = self.learner.algorithm.guard.take_skipped()
        return UpdateResult(env_steps, np.concatenate(returns),
                            np.concatenate(lengths), stats,
                            {"time_collect_s": collect_s, "time_compute_s": compute_s})

    def state_dict(self) -> dict[str, Any]:
        """The learner's state (replay included), the collector's and the steps since the last
        training round, for a checkpoint."""
        return {"learner": self.learner.state_dict(), "collectors": [self.collector.state_dict()],
                "since_round": self.since_round}

    def load_state_dict(self, state: dict[str, Any], actor_state: dict[str, Any]) -> list[str]:
        """Restore the roles (``actor_state``, the saved policy, is part of the learner's
        state too); returns env attributes that could not be restored exactly."""
        self.learner.load_state_dict(state["learner"])
        self.since_round = int(state["since_round"])
        self.collector.load_weights(self.learner.weights())
        (collector_state,) = state["collectors"]
        return self.collector.load_state_dict(collector_state)

    def close(self) -> None:
        """Close the envs."""
        self.envs.close()
