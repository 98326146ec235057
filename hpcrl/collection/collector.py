"""The collector role: one loop that steps a vector of envs with a policy, for either family.

The loop (:meth:`Collector.collect`) is the same for every algorithm: show the policy the
observations, step the envs with the actions it chose, note final observations and
episode ends, check what the envs returned, count the steps. The envs come in groups that
take turns (``scheme.env_groups``, :mod:`hpcrl.envs.groups`): each group's actions are
asked for (:meth:`Filler.request`) as soon as its observations are there and taken
(:meth:`Filler.take`) only when the group steps next, so that where acting runs elsewhere
(an inference rank) one group's actions are computed while another group steps, and where
the envs step elsewhere (subprocesses, EnvPool's threads) one group's actions are computed
here while the other group's envs step. With one group the loop is the plain one. Every env
sees the same observations, noise and actions whatever the grouping, and what the steps
become is written in the same order. What the steps become is the :class:`Filler`'s: a
:class:`~hpcrl.collection.rollout_filler.RolloutFiller` chooses actions
with an actor-critic and writes rollouts (normalising through a transform on the way in),
a :class:`~hpcrl.collection.transition_filler.TransitionFiller` explores and writes n-step
transition chunks for a replay. Both stand on one :class:`~hpcrl.collection.env_core.EnvCore`:
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

from hpcrl.collection.env_core import CollectionFacts, EnvCore, StepFacts, restart_ledger
from hpcrl.collection.rollout_filler import RolloutFiller
from hpcrl.collection.transition_filler import (
    COLLECT_STREAM,
    TransitionFiller,
    TransitionSections,
)
from hpcrl.envs.groups import EnvGroup, EnvGroups
from hpcrl.envs.multiagent.play_modes import plays_league
from hpcrl.envs.obs_format import obs_format
from hpcrl.envs.vector import JOB_CLOCK
from hpcrl.exchange.messages import Weights
from hpcrl.runtime.finite import check_env_rows, check_env_steps
from hpcrl.sections.schema import EnvConfig

if TYPE_CHECKING:  # annotations only
    from hpcrl.buffers.replay.transitions import Transitions
    from hpcrl.buffers.rollout import Rollout
    from hpcrl.models.acting import ValueEngine
    from hpcrl.models.actor import ActorCritic

StopCheck = Callable[[int], bool]
BufferT = TypeVar("BufferT")


class Filler(Protocol[BufferT]):
    """What one family makes of a collection's steps, and how it acts: the collector calls
    :meth:`begin`, then per step and group :meth:`request` and :meth:`take` (the actions),
    :meth:`record` and (where episodes ended) :meth:`end_episodes`, then :meth:`finish`;
    :meth:`drop` when a collection ends with a request unanswered (preemption)."""

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

    def request(self, t: int, group: EnvGroup, obs: np.ndarray) -> None:
        """Ask for step ``t``'s actions of ``group`` on its raw observations ``obs``."""
        ...

    def take(self, t: int, group: EnvGroup) -> np.ndarray:
        """The actions :meth:`request` asked for, as ``group``'s envs take them (waiting
        for them where another process computes them)."""
        ...

    def drop(self, group: EnvGroup) -> None:
        """Wait for and discard the answer to ``group``'s last request."""
        ...

    def record(self, step: StepFacts) -> None:
        """Write what one group's envs returned for one step (the groups of a step are
        recorded in order)."""
        ...

    def end_episodes(self, t: int, group: EnvGroup, done: np.ndarray, returns: np.ndarray,
                     lengths: np.ndarray) -> None:
        """The episodes ``done`` of ``group`` ended at step ``t`` with these game returns
        and lengths (the group's own rows)."""
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

    def __init__(self, core: EnvCore, filler: Filler[BufferT], collector_id: int = 0,
                 job_clock: bool = False) -> None:
        self.core, self.filler, self.collector_id = core, filler, collector_id
        self.job_clock = job_clock  # tell the envs the job's env steps (JOB_CLOCK)
        self.weights_version = 0
        # (step, envs, final observations) of the episodes that ended during a collection
        self._finals: list[tuple[int, np.ndarray, np.ndarray]] = []

    @property
    def envs(self) -> EnvGroups:
        """The groups of envs this collector steps."""
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
        if self.job_clock:
            core.envs.call(JOB_CLOCK, job_env_steps)
        steps, raw_obs, raw_rewards = filler.begin(buffer, steps, job_env_steps)
        self._finals.clear()
        groups = core.groups
        # where the envs step outside this thread, a group's next step starts as soon as it
        # has its actions, and the others' acting overlaps it; with preemption a step must
        # not start before the collection knows it goes on
        split = core.envs.asynchronous and len(groups) > 1 and should_stop is None
        raw_obs[0] = core.obs
        for group in groups:
            filler.request(0, group, core.obs[group.cols])
        if split:
            for group in groups:
                core.begin(group, filler.take(0, group))
        done_steps = steps
        for t in range(steps):
            more = t + 1 < steps
            for group in groups:
                if not split:
                    core.begin(group, filler.take(t, group))
                self._end_step(t, group, raw_rewards)
                if more:
                    obs = core.next_obs[group.cols]
                    raw_obs[t + 1, group.cols] = obs
                    filler.request(t + 1, group, obs)
                    if split:
                        core.begin(group, filler.take(t + 1, group))
            core.advance()
            if more and should_stop is not None and should_stop(t + 1):
                for group in groups:
                    filler.drop(group)
                done_steps = t + 1
                break
        self._check(raw_obs[:done_steps], raw_rewards[:done_steps])
        core.vector_steps += done_steps
        return filler.finish(done_steps, raw_obs[:done_steps],
                             CollectionFacts(self.weights_version, self.env_offset,
                                             self.collector_id, time.perf_counter() - started,
                                             core.restarts.take()))

    def _end_step(self, t: int, group: EnvGroup, raw_rewards: np.ndarray) -> None:
        """Group ``group``'s step ``t`` returned: note its final observations and episode
        ends, hand the filler what it needs, and keep its next observations (current once
        every group has taken the step: :meth:`EnvCore.advance`)."""
        core, filler = self.core, self.filler
        obs = core.obs[group.cols]
        next_obs, rewards, terminated, truncated, info = core.end(group)
        cut = core.note_restarts(group, info, t)  # envs a failure cut (made again)
        core.next_obs[group.cols] = next_obs
        raw_rewards[t, group.cols] = rewards
        done = terminated | truncated
        ended = np.flatnonzero(done)
        wanted, final = ended, None
        if ended.size:
            if not filler.finals_of_terminated:
                wanted = np.flatnonzero(truncated & ~terminated)
            if wanted.size:
                final = core.final_observations(wanted, info)
                self._finals.append((t, wanted + group.cols.start, final))
        filler.record(StepFacts(t, group, obs, next_obs, rewards, terminated, truncated,
                                done, ended, wanted, final, cut))
        if ended.size:
            filler.end_episodes(t, group, done, *core.end_episodes(group, done, info, cut))

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


def rollout_collector(envs: gym.vector.VectorEnv | EnvGroups, actor: ActorCritic, config: EnvConfig,
                      gamma: float, seed: int, env_offset: int = 0, collector_id: int = 0,
                      total_envs: int | None = None,
                      engine: ValueEngine | None = None,
                      incarnation: int = 0) -> Collector[Rollout]:
    """An on-policy collector of ``envs`` (global indices ``env_offset ..`` of
    ``total_envs`` in the job, default its own) that fills rollouts with ``actor``'s
    actions (see :class:`~hpcrl.collection.rollout_filler.RolloutFiller`); ``incarnation`` > 0
    when it takes the place of a lost collector (fresh seeds: :class:`EnvCore`)."""
    core = EnvCore(envs, actor.obs_format, seed, env_offset, total_envs,
                   restarts=restart_ledger(config, envs.num_envs, env_offset),
                   incarnation=incarnation)
    return Collector(core, RolloutFiller(core, actor, config, gamma, engine), collector_id,
                     job_clock=plays_league(config))


def transition_collector(envs: gym.vector.VectorEnv | EnvGroups, policy: nn.Module,
                         sections: TransitionSections, env_offset: int = 0,
                         collector_id: int = 0, total_envs: int | None = None,
                         collector_index: int = 0, collector_count: int = 1, acting: Any = None,
                         incarnation: int = 0) -> Collector[Transitions]:
    """An off-policy collector of ``envs`` that fills transition chunks with ``policy``'s
    exploration (see :class:`~hpcrl.collection.transition_filler.TransitionFiller`), reading
    only the ``sections`` a transition collector needs."""
    seed = sections.seed
    core = EnvCore(envs, obs_format(envs.single_observation_space), seed, env_offset,
                   total_envs, stream=(COLLECT_STREAM,),
                   restarts=restart_ledger(sections.env, envs.num_envs, env_offset),
                   incarnation=incarnation)
    filler = TransitionFiller(core, policy, sections.replay, sections.algo, seed,
                              sections.train, collector_index, collector_count, acting)
    return Collector(core, filler, collector_id)
