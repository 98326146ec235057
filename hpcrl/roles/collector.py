"""The collector role: one loop that steps a vector of envs with a policy, for either family.

The loop (:meth:`Collector.collect`) is the same for every algorithm: show the policy the
observations, step the envs with the actions it chose, note final observations and
episode ends, check what the envs returned, count the steps. What the steps become is the
:class:`Filler`'s: a :class:`~hpcrl.roles.rollout_filler.RolloutFiller` chooses actions
with an actor-critic and writes rollouts (normalising through a transform on the way in),
a :class:`~hpcrl.roles.transition_filler.TransitionFiller` explores and writes n-step
transition chunks for a replay. Both stand on one :class:`~hpcrl.roles.env_core.EnvCore`:
the envs, their seeded generators, observations and episode trackers.

What the envs return is checked once per collection
(:func:`hpcrl.runtime.finite.check_env_steps` on the raw observations and rewards in
hand): a NaN or inf stops the run naming the env and its step, before the buffer reaches a
gradient, a replay or the normaliser.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import gymnasium as gym
import numpy as np
from torch import nn

from hpcrl.core.obs_format import obs_format
from hpcrl.roles.env_core import CollectionFacts, EnvCore, StepFacts
from hpcrl.roles.messages import Weights
from hpcrl.roles.rollout_filler import RolloutFiller
from hpcrl.roles.transition_filler import COLLECT_STREAM, TransitionFiller
from hpcrl.runtime.finite import check_env_rows, check_env_steps

if TYPE_CHECKING:  # annotations only
    from hpcrl.config.schema import Config, EnvConfig
    from hpcrl.core.acting import PolicyEngine
    from hpcrl.core.actor import ActorCritic
    from hpcrl.core.replay.transitions import Transitions
    from hpcrl.core.rollout import Rollout

StopCheck = Callable[[int], bool]
BufferT = TypeVar("BufferT")


class Filler(Protocol[BufferT]):
    """What one family makes of a collection's steps, and how it acts: the collector calls
    :meth:`begin`, then per step :meth:`act`, :meth:`record` and (where episodes ended)
    :meth:`end_episodes`, then :meth:`finish`."""

    #: whether a terminated episode's final observation is wanted too (a transition's next
    #: observation), or only a truncated one's (a rollout bootstraps from it alone)
    finals_of_terminated: bool

    @property
    def module(self) -> nn.Module:
        """The policy that new weights load into."""
        ...

    def sync(self) -> None:
        """Act with the module's current weights from now on."""
        ...

    def begin(self, buffer: BufferT, steps: int | None, job_env_steps: int
              ) -> tuple[int, np.ndarray, np.ndarray]:
        """Start filling ``buffer``: returns the steps to take (``steps``, or the buffer's
        own count) and the buffers for the raw observations and rewards."""
        ...

    def act(self, t: int, obs: np.ndarray) -> np.ndarray:
        """Step ``t``'s actions on the raw observations ``obs``, as the envs take them."""
        ...

    def record(self, step: StepFacts) -> None:
        """Write what the envs returned for one step."""
        ...

    def end_episodes(self, t: int, done: np.ndarray, returns: np.ndarray,
                     lengths: np.ndarray) -> None:
        """The episodes ``done`` ended at step ``t`` with these game returns and lengths."""
        ...

    def finish(self, steps: int, raw_obs: np.ndarray, facts: CollectionFacts) -> BufferT:
        """Close the buffer after ``steps`` steps and write its header."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The filler's part of a checkpoint."""
        ...

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool) -> None:
        """Restore :meth:`state_dict` (``envs_restored``: whether the envs were too)."""
        ...


class Collector(Generic[BufferT]):
    """Steps ``core``'s envs and fills buffers through ``filler``; ``collector_id`` names
    it in each buffer's header (its rank)."""

    def __init__(self, core: EnvCore, filler: Filler[BufferT], collector_id: int = 0) -> None:
        self.core, self.filler, self.collector_id = core, filler, collector_id
        self.weights_version = 0
        # (step, envs, final observations) of the episodes that ended during a collection
        self._finals: list[tuple[int, np.ndarray, np.ndarray]] = []

    @property
    def envs(self) -> gym.vector.VectorEnv:
        """The vector env this collector steps."""
        return self.core.envs

    @property
    def env_offset(self) -> int:
        """The global index of its first env."""
        return self.core.env_offset

    @property
    def vector_steps(self) -> int:
        """Steps of this collector's vector env so far."""
        return self.core.vector_steps

    # -- weights -----------------------------------------------------------------------------
    def load_weights(self, weights: Weights) -> None:
        """Collect from now on with this version of the policy."""
        weights.load_into(self.filler.module)
        self.follow(weights.version)

    def follow(self, version: int) -> None:
        """Collect from now on with the policy's current weights, version ``version`` (also
        when the policy is shared with a learner that just changed it)."""
        self.weights_version = version
        self.filler.sync()

    # -- collection --------------------------------------------------------------------------
    def collect(self, buffer: BufferT, steps: int | None = None, *,
                should_stop: StopCheck | None = None,
                job_env_steps: int | None = None) -> BufferT:
        """Fill ``buffer`` with ``steps`` steps of every env (default: as many as it holds).

        ``should_stop(steps_done)`` is asked after every step; when it says True the
        collection ends early (DD-PPO preemption). ``job_env_steps`` counts the job's env
        steps before this collection (default: this collector's steps times the job's
        envs, as every collector of the job counts alike).
        """
        started = time.perf_counter()
        core, filler = self.core, self.filler
        if job_env_steps is None:
            job_env_steps = core.vector_steps * core.total_envs
        steps, raw_obs, raw_rewards = filler.begin(buffer, steps, job_env_steps)
        finals = self._finals
        finals.clear()
        obs = core.obs
        done_steps = 0
        for t in range(steps):
            raw_obs[t] = obs
            env_actions = filler.act(t, obs)
            next_obs, rewards, terminated, truncated, info = core.step(env_actions)
            raw_rewards[t] = rewards
            done = terminated | truncated
            ended = np.flatnonzero(done)
            wanted, final = ended, None
            if ended.size:
                if not filler.finals_of_terminated:
                    wanted = np.flatnonzero(truncated & ~terminated)
                if wanted.size:
                    final = core.final_observations(wanted, info)
                    finals.append((t, wanted, final))
            filler.record(StepFacts(t, obs, next_obs, rewards, terminated, truncated, done,
                                    ended, wanted, final))
            if ended.size:
                filler.end_episodes(t, done, *core.end_episodes(done, info))
            obs = next_obs
            done_steps = t + 1
            if should_stop is not None and done_steps < steps and should_stop(done_steps):
                break
        core.obs = obs
        self._check(raw_obs[:done_steps], raw_rewards[:done_steps])
        core.vector_steps += done_steps
        return filler.finish(done_steps, raw_obs[:done_steps],
                             CollectionFacts(self.weights_version, self.env_offset,
                                             self.collector_id, time.perf_counter() - started))

    def _check(self, raw_obs: np.ndarray, raw_rewards: np.ndarray) -> None:
        """Stop on a non-finite observation or reward of this collection, the next
        observation, or a final observation the filler took (``raw_obs[t]`` came from
        vector step ``vector_steps + t``)."""
        first, total = self.core.vector_steps, self.core.total_envs
        check_env_steps("observation", raw_obs, self.env_offset, first, total)
        check_env_steps("reward", raw_rewards, self.env_offset, first + 1, total)
        check_env_steps("observation", self.core.obs[None], self.env_offset,
                        first + len(raw_obs), total)
        check_env_rows("final observation", self._finals, self.env_offset, first + 1, total)

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: env states, generators, trackers, and
        the filler's part (normaliser, recurrent states, n-step windows, noise)."""
        return {**self.core.state_dict(), **self.filler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> list[str]:
        """Restore :meth:`state_dict`; returns the env attributes that could not be restored
        (their envs keep the fresh seeded reset instead)."""
        inexact = self.core.load_generators(state)
        self.filler.load_state_dict(state, envs_restored=not inexact)
        if inexact:
            return inexact
        self.core.load_envs(state)
        return []


def rollout_collector(envs: gym.vector.VectorEnv, actor: ActorCritic, config: EnvConfig,
                      gamma: float, seed: int, env_offset: int = 0, collector_id: int = 0,
                      total_envs: int | None = None,
                      engine: PolicyEngine | None = None) -> Collector[Rollout]:
    """An on-policy collector of ``envs`` (global indices ``env_offset ..`` of
    ``total_envs`` in the job, default its own) that fills rollouts with ``actor``'s
    actions (see :class:`~hpcrl.roles.rollout_filler.RolloutFiller`)."""
    core = EnvCore(envs, actor.obs_format, seed, env_offset, total_envs)
    return Collector(core, RolloutFiller(core, actor, config, gamma, engine), collector_id)


def transition_collector(envs: gym.vector.VectorEnv, policy: nn.Module, config: Config,
                         env_offset: int = 0, collector_id: int = 0,
                         total_envs: int | None = None, collector_index: int = 0,
                         collector_count: int = 1, acting: Any = None
                         ) -> Collector[Transitions]:
    """An off-policy collector of ``envs`` that fills transition chunks with ``policy``'s
    exploration (see :class:`~hpcrl.roles.transition_filler.TransitionFiller`)."""
    core = EnvCore(envs, obs_format(envs.single_observation_space), config.seed, env_offset,
                   total_envs, stream=(COLLECT_STREAM,))
    filler = TransitionFiller(core, policy, config, collector_index, collector_count, acting)
    return Collector(core, filler, collector_id)
