"""What an on-policy collection makes of its steps: a :class:`~hpcrl.buffers.rollout.Rollout`.

The one collection loop (:class:`hpcrl.collection.collector.Collector`) steps the envs; this
filler chooses each step's actions with the actor-critic's engine and writes what the
rollout keeps: the observations as the policy saw them, actions, log-probs, values, rewards,
episode ends, a recurrent actor's state where each sequence starts, and at the end the
values to bootstrap from and the moments of what the normaliser saw.

Its randomness is per env: env ``i`` of the job draws its action noise from a generator
seeded by ``(seed, i)``, so a collector holding envs ``[a, b)`` produces exactly those
columns of the rollout that one collector holding every env would.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcrl.buffers.rollout import Rollout
from hpcrl.collection.env_core import CollectionFacts, EnvCore, StepFacts
from hpcrl.collection.normalizing import NormalizingTransform
from hpcrl.envs.groups import EnvGroup
from hpcrl.envs.scripted import ScriptedSlots
from hpcrl.envs.vector import as_box
from hpcrl.models.acting import ValueEngine, make_engine
from hpcrl.models.actor import ActorCritic
from hpcrl.sections.schema import EnvConfig


class RolloutFiller:
    """Fills rollouts of ``core``'s envs with ``actor``'s actions.

    ``engine`` evaluates the policy (default: :func:`~hpcrl.models.acting.make_engine` of
    ``actor``; an inference rank's remote engine in a scheme with inference ranks, where
    ``actor`` then only keeps the normalisers that arrive with the weights). ``config`` (the
    ``env`` section) and ``gamma`` set the normalising transform between the envs and the
    rollout."""

    # a terminated episode's value is 0: only truncated ones bootstrap from a final obs
    finals_of_terminated = False

    def __init__(self, core: EnvCore, actor: ActorCritic, config: EnvConfig, gamma: float,
                 engine: ValueEngine | None = None) -> None:
        self.core, self.actor = core, actor
        n = core.num_envs
        space = core.envs.single_action_space
        self.clip_low = None if actor.integer_actions else as_box(space).low.astype(np.float32)
        self.clip_high = (None if actor.integer_actions
                          else as_box(space).high.astype(np.float32))
        # integer components go to the env as the integers its space holds
        self.env_dtype = space.dtype if actor.integer_actions and not actor.discrete else None
        self.gamma = gamma
        self.engine = engine if engine is not None else make_engine(actor)
        # slots that play recordings (PPO+D's demonstrations: hpcrl.envs.scripted), when the
        # envs have them (one group: the config refuses them with several)
        only = core.envs.only
        self.replay: ScriptedSlots | None = only if isinstance(only, ScriptedSlots) else None
        # env.normalize_obs / normalize_reward between the envs and the rollout
        self.normalizing = NormalizingTransform(config, gamma, n)
        # a recurrent actor's state per env: zero at an episode's start, carried across
        # rollouts (None for a feedforward actor)
        self.memory: np.ndarray | None = (np.zeros((n, actor.state_size), np.float32)
                                             if actor.recurrent else None)
        self.rollout: Rollout | None = None  # the one being filled
        self._noise = np.empty(0, np.float32)
        self._length = 0  # steps per recurrent sequence (the rollout's, when not cut)
        # bootstrap values of the episodes truncated during the rollout: step -> a list of
        # (envs, values), one per group whose episodes were cut there
        self._final_values: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        # (step, envs) whose episode a failure cut there (their envs were made again)
        self._cuts: list[tuple[int, np.ndarray]] = []

    @property
    def module(self) -> ActorCritic:
        """The actor the weights load into."""
        return self.actor

    def sync(self) -> None:
        """Act and normalise with the actor's current weights and statistics."""
        self.engine.sync()
        self.normalizing.sync(self.actor)

    # -- one collection ----------------------------------------------------------------------
    def begin(self, buffer: Rollout, steps: int | None, job_env_steps: int
              ) -> tuple[int, np.ndarray, np.ndarray]:
        """Start filling ``buffer`` (all its ``num_steps`` unless ``steps`` says fewer): draw
        every env's action noise for it, and give the loop the buffers for the raw
        observations and rewards (the rollout's own where nothing is normalised)."""
        steps = buffer.layout.num_steps if steps is None else steps
        self.rollout = buffer
        dist = self.actor.distribution
        shape = (steps,) + dist.noise_shape()
        rngs = self.core.rngs
        if dist.uniform_noise:
            cols = [rng.random(shape, dtype=np.float32) for rng in rngs]
        else:
            cols = [rng.standard_normal(shape, dtype=np.float32) for rng in rngs]
        self._noise = np.stack(cols, axis=1)
        self.normalizing.begin()
        self._final_values.clear()
        self._cuts.clear()
        self._length = buffer.layout.sequence_length or steps
        norm = self.normalizing
        raw_obs = (self.core.raw_buffer("obs", buffer.obs.shape, buffer.obs.dtype)
                   if norm.normalizes_obs else buffer.obs)
        raw_rewards = (self.core.raw_buffer("rewards", buffer.rewards.shape,
                                            buffer.rewards.dtype)
                       if norm.normalizes_reward else buffer.rewards)
        return steps, raw_obs, raw_rewards

    def request(self, t: int, group: EnvGroup, obs: np.ndarray) -> None:
        """Ask for step ``t``'s actions of ``group`` on ``obs`` (as its envs returned them):
        the rollout's observation written (normalised when asked), a sequence's first
        recurrent state stored, and the engine handed the rows with their noise."""
        rollout = self.rollout
        assert rollout is not None
        cols = group.cols
        if self.normalizing.normalizes_obs:
            rollout.obs[t, cols] = self.normalizing.observation(obs)
        memory = None if self.memory is None else self.memory[cols]
        if memory is not None and t % self._length == 0:  # where a sequence starts
            rollout.memory[t // self._length, cols] = memory
        self.engine.submit(group.index, rollout.obs[t, cols], self._noise[t, cols], memory)

    def take(self, t: int, group: EnvGroup) -> np.ndarray:
        """Step ``t``'s actions of ``group``: the rollout's action, log-prob and value
        written, the recurrent state advanced; returns the actions as the env takes them
        (clipped to its bounds, or its integer type)."""
        rollout = self.rollout
        assert rollout is not None
        cols = group.cols
        actions, log_probs, values, memory = self.engine.result(group.index)
        if log_probs is None or values is None:
            raise TypeError("a rollout keeps its actions' log-probs and values: the actor's "
                            "engine must step into them (hpcrl.models.acting.ValueEngine)")
        if memory is not None:
            assert self.memory is not None
            self.memory[cols] = memory
        if self.replay is not None:  # PPO+D: replay slots take the demonstrated action
            slots, replayed = self.replay.replayed_actions()
            actions = actions.copy()
            actions[slots] = replayed
        rollout.actions[t, cols] = actions
        rollout.log_probs[t, cols] = log_probs
        rollout.values[t, cols] = values
        if self.clip_low is not None:
            return np.clip(actions, self.clip_low, self.clip_high)
        if self.env_dtype is not None:
            return actions.astype(self.env_dtype)
        return actions

    def drop(self, group: EnvGroup) -> None:
        """Discard the answer to ``group``'s last request (a collection cut short)."""
        self.engine.result(group.index)

    def record(self, step: StepFacts) -> None:
        """Write one group's step ``t`` rewards (normalised when asked) and episode ends; a
        truncated episode's value is taken on its final observation, to bootstrap from."""
        rollout, t, cols = self.rollout, step.t, step.cols
        assert rollout is not None
        rollout.rewards[t, cols] = self.normalizing.reward(step.rewards, cols)
        rollout.terminated[t, cols] = step.terminated
        rollout.truncated[t, cols] = step.truncated
        finals, envs = step.final_obs, step.final_envs
        if step.cut is not None:  # a failure's cut: no bootstrap from its final obs
            self._cuts.append((t, np.flatnonzero(step.cut) + cols.start))
            kept = ~step.cut[envs]
            finals = None if finals is None or not kept.any() else finals[kept]
            envs = envs[kept]
        if finals is not None:  # of the truncated episodes alone
            envs = envs + cols.start
            final = self.normalizing.observation(finals)
            state = None if self.memory is None else self.memory[envs]
            self._final_values.setdefault(t, []).append(
                (envs, self.engine.value(final, state, step.group.index)))

    def end_episodes(self, t: int, group: EnvGroup, done: np.ndarray, returns: np.ndarray,
                     lengths: np.ndarray) -> None:
        """The episodes ``done`` of ``group`` ended at step ``t``: their game return and
        length go into the rollout (a PPO+D replay slot's none: a replayed episode is no
        episode of the agent's), their discounted returns and recurrent states start
        again."""
        rollout, cols = self.rollout, group.cols
        assert rollout is not None
        rollout.episode_returns[t, cols], rollout.episode_lengths[t, cols] = returns, lengths
        if self.replay is not None:
            rollout.episode_lengths[t, self.replay.replay_index] = 0
        self.normalizing.end_episodes(done, cols)
        if self.memory is not None:
            self.memory[cols][done] = 0.0  # the next observation starts an episode

    def finish(self, steps: int, raw_obs: np.ndarray, facts: CollectionFacts) -> Rollout:
        """Close the rollout after ``steps`` steps: ``next_values`` per
        :func:`hpcrl.buffers.returns.gae`'s contract, the normaliser moments of the raw
        observations, and its header."""
        rollout = self.rollout
        assert rollout is not None
        last = self.normalizing.observation(self.core.obs)
        rollout.next_values[:steps - 1] = rollout.values[1:steps]
        for group in self.core.groups:  # each group's own link where another process acts
            cols = group.cols
            rollout.next_values[steps - 1, cols] = self.engine.value(
                last[cols], None if self.memory is None else self.memory[cols], group.index)
        if rollout.layout.last_obs:
            rollout.last_obs[:] = last
        rollout.next_values[:steps][rollout.terminated[:steps] > 0] = 0.0
        for t, parts in self._final_values.items():
            for envs, values in parts:
                rollout.next_values[t, envs] = values
        for t, envs in self._cuts:
            cut_step(rollout, t, envs, self.gamma)
        rollout.set_moments(*self.normalizing.moments(raw_obs))
        rollout.set_facts(steps, facts.weights_version, facts.env_offset, facts.source,
                          facts.seconds, facts.env_restarts)
        self.rollout = None
        return rollout

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The normaliser's discounted returns, PPO+D's replay slots and the recurrent
        states, beside the env core's part of the checkpoint."""
        return {**self.normalizing.state_dict(),
                **({} if self.replay is None else {"demo_replay": self.replay.replay_state()}),
                **({} if self.memory is None
                   else {"memory": torch.from_numpy(self.memory.copy())})}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool) -> None:
        """Restore :meth:`state_dict` when the envs were restored too (else every env
        starts afresh, and so do these)."""
        if not envs_restored:
            return
        self.normalizing.load_state_dict(state)
        if self.replay is not None:
            self.replay.load_replay_state(state["demo_replay"])
        if self.memory is not None:
            if "memory" not in state or tuple(state["memory"].shape) != self.memory.shape:
                raise ValueError("the checkpoint holds no recurrent state of this actor's size "
                                 "for its envs: actor.memory changed since it was written")
            self.memory = state["memory"].numpy().copy()


def cut_step(rollout: Rollout, t: int, envs: np.ndarray, gamma: float) -> None:
    """Make step ``t`` of ``envs`` (a step their env failed in, its episode cut there: it
    is marked truncated) teach nothing: no reward, and a next value whose discounted sum
    is the step's own value, so that GAE's error there is 0: the step's advantage is 0, its
    value target its value, and no advantage flows from it into the steps before, which
    bootstrap from the value of the last observation the env gave (a truncation there).
    V-trace reads the same next value as that observation's value."""
    values = rollout.values[t, envs]
    rollout.rewards[t, envs] = 0.0 if gamma > 0 else values
    rollout.next_values[t, envs] = values / gamma if gamma > 0 else 0.0
