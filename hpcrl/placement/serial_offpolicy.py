"""Serial placement of an off-policy agent: collector and learner in one process.

It runs the learner loop of the MPI placement's learner rank
(:class:`~hpcrl.learning.replay_loop.ReplayLoop`) with the collector of this very process as
its source of chunks (:class:`CollectorInProcess`) and as the place its weights go
(:class:`~hpcrl.exchange.weights.WeightsSync`), with a tolerance of 0: the collector
collects a chunk only when no gradient step is due, and each chunk ends where the next
training round falls due (every ``replay.train_freq`` steps per env) or where the update
ends. So one update collects ``algo.num_steps`` steps of every env and trains a round of
``replay.gradient_steps`` steps at every such point past ``replay.learning_starts``, by the
rule an Ape-X job follows. Collector and learner hold separate copies of the policy and
exchange only flat buffers (transition chunks and weights), as they would on two ranks."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from torch import nn

from hpcrl.build import env_groups
from hpcrl.config.schema import Config
from hpcrl.core.algorithms.offpolicy import make_offpolicy_algorithm, make_policy
from hpcrl.core.compiling import compile_loss
from hpcrl.core.demo_replay import collector_envs
from hpcrl.core.envs import EnvSpaces
from hpcrl.core.flat import has_flat_parameters
from hpcrl.core.replay.transitions import Transitions
from hpcrl.exchange.weights import CopyInProcess, SharedInPlace, WeightsSync
from hpcrl.learning.replay_loop import ReplayLoop
from hpcrl.roles.collector import Collector, transition_collector
from hpcrl.roles.protocol import Report, ReportLayout
from hpcrl.roles.replay_learner import ReplayLearner, make_replay
from hpcrl.roles.transition_filler import chunk_layout
from hpcrl.runtime.cpu import retain_freed_memory
from hpcrl.runtime.devices import pick_device


class CollectorInProcess:
    """A :class:`~hpcrl.learning.replay_loop.ChunkSource` of one collector in this process:
    when the loop asks whether a chunk arrived, the collector collects it then, ``steps()``
    steps of every env from the job's ``job_env_steps()``."""

    def __init__(self, collector: Collector[Transitions], chunk: Transitions,
                 steps: Callable[[], int], job_env_steps: Callable[[], int]) -> None:
        self.collector, self.chunk = collector, chunk
        self.steps, self.job_env_steps = steps, job_env_steps
        self.posted = [True]
        self.local_seconds = 0.0  # collecting, inside arrived()

    @property
    def buffers(self) -> list[Any]:
        """The one chunk buffer."""
        return [self.chunk]

    @property
    def live(self) -> int:
        """One collector, always live."""
        return 1

    def arrived(self, i: int) -> bool:
        """Collect the next chunk (unless the loop holds the collector back)."""
        if not self.posted[i]:
            return False
        started = time.perf_counter()
        self.collector.collect(self.chunk, self.steps(), job_env_steps=self.job_env_steps())
        self.local_seconds += time.perf_counter() - started
        self.posted[i] = False
        return True

    def post(self, i: int) -> None:
        """Let the collector collect again."""
        self.posted[i] = True

    def drain(self) -> None:
        """Nothing is in flight in one process."""


class SerialOffPolicyPlacement:
    """The collector and the learner of one off-policy agent in this process."""

    def __init__(self, config: Config, spaces: EnvSpaces) -> None:
        self.config = config
        retain_freed_memory()  # the learner's activations are reused, not re-faulted
        n = config.env.num_envs
        self.num_envs = n
        device = pick_device(config.train.device, None)
        algorithm = make_offpolicy_algorithm(config, spaces, device)
        if config.train.compile:
            compile_loss(algorithm, device)
        replay = make_replay(config, spaces.obs_shape, spaces.action_shape, spaces.discrete,
                             spaces.obs_format.dtype, spaces.obs_format, streams=n)
        self.learner = ReplayLearner(algorithm, replay, config)
        self.envs = collector_envs(config, 0, n, env_groups(config, remote=False))
        # on the CPU the collector acts with the learner's very policy (its parameters one
        # flat slice of the learner's): a new version copies nothing; elsewhere its own copy
        shared = device.type == "cpu" and has_flat_parameters(algorithm.policy)
        policy = algorithm.policy if shared else make_policy(config, spaces)
        self.collector = transition_collector(self.envs, policy, config)
        self.sync: WeightsSync = (SharedInPlace(self.collector.follow) if shared else
                                  CopyInProcess(policy, self.collector.load_weights))
        chunk = chunk_layout(config, spaces.obs_shape, spaces.action_shape, n,
                             spaces.obs_format.dtype).new()
        self.update_env_steps = 0  # the job's env steps before the current update
        self.source = CollectorInProcess(self.collector, chunk, self._chunk_steps,
                                         lambda: self.loop.env_steps)
        self.loop = ReplayLoop(self.learner, config, n, self.source, self.sync, tolerance=0,
                               base_env_steps=lambda: self.update_env_steps)
        self._publish()

    def _publish(self) -> None:
        """The collector acts with the learner's current policy from now on."""
        self.sync.publish(self.learner.algorithm.policy, self.learner.version)

    def _chunk_steps(self) -> int:
        """Steps per env of the next chunk: up to where the next training round falls due,
        or where the update ends."""
        freq = self.config.replay.train_freq
        since_round = (self.loop.env_steps // self.num_envs) % freq
        left = (self.loop.per_update - self.loop.row.env_steps) // self.num_envs
        return min(freq - since_round, left)

    @property
    def master_actor(self) -> nn.Module:
        """The learner's policy (what checkpoints save and evaluation runs)."""
        return self.learner.algorithm.policy

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The loss terms of the progress rows (the learner's)."""
        return self.learner.stat_names

    @property
    def layout(self) -> ReportLayout:
        """The layout of the update reports (:meth:`run_update`'s)."""
        return self.loop.layout

    def run_update(self, update: int, env_steps: int) -> Report:
        """Collect ``algo.num_steps`` steps per env, training whenever a round is due (the
        run's ``update``-th update, after ``env_steps`` env steps); returns its report."""
        self.update_env_steps = env_steps
        return self.loop.learn_update()

    def state_dict(self) -> dict[str, Any]:
        """The learner's state (replay included) and the collector's, for a checkpoint (taken
        between updates: nothing of the next one has been collected)."""
        return {"learner": self.learner.state_dict(), "collectors": [self.collector.state_dict()]}

    def load_state_dict(self, state: dict[str, Any], actor_state: dict[str, Any]) -> list[str]:
        """Restore the roles (``actor_state``, the saved policy, is part of the learner's
        state too); returns env attributes that could not be restored exactly. (A checkpoint
        of an older version also holds the steps since the last training round: they follow
        from the env steps.)"""
        self.learner.load_state_dict(state["learner"])
        self._publish()
        (collector_state,) = state["collectors"]
        return self.collector.load_state_dict(collector_state)

    def close(self) -> None:
        """Close the envs."""
        self.envs.close()
