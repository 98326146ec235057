"""What an on-policy collection makes of its steps: a :class:`~hpcrl.core.rollout.Rollout`.

The one collection loop (:class:`hpcrl.roles.collector.Collector`) steps the envs; this
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

from hpcrl.config.schema import EnvConfig
from hpcrl.core.acting import PolicyEngine, make_engine
from hpcrl.core.actor import ActorCritic
from hpcrl.core.demo_replay import DemoSlots
from hpcrl.core.envs import as_box
from hpcrl.core.rollout import Rollout
from hpcrl.roles.env_core import CollectionFacts, EnvCore, StepFacts
from hpcrl.roles.normalizing import NormalizingTransform


class RolloutFiller:
    """Fills rollouts of ``core``'s envs with ``actor``'s actions.

    ``engine`` evaluates the policy (default: :func:`~hpcrl.core.acting.make_engine` of
    ``actor``; an inference rank's remote engine in a scheme with inference ranks, where
    ``actor`` then only keeps the normalisers that arrive with the weights). ``config`` (the
    ``env`` section) and ``gamma`` set the normalising transform between the envs and the
    rollout."""

    # a terminated episode's value is 0: only truncated ones bootstrap from a final obs
    finals_of_terminated = False

    def __init__(self, core: EnvCore, actor: ActorCritic, config: EnvConfig, gamma: float,
                 engine: PolicyEngine | None = None) -> None:
        self.core, self.actor = core, actor
        n = core.num_envs
        space = core.envs.single_action_space
        self.clip_low = None if actor.integer_actions else as_box(space).low.astype(np.float32)
        self.clip_high = (None if actor.integer_actions
                          else as_box(space).high.astype(np.float32))
        # integer components go to the env as the integers its space holds
        self.env_dtype = space.dtype if actor.integer_actions and not actor.discrete else None
        self.engine = engine if engine is not None else make_engine(actor)
        # PPO+D's replay slots (hpcrl.core.demo_replay), when the envs have them
        self.replay: DemoSlots | None = (core.envs if isinstance(core.envs, DemoSlots)
                                         else None)
        # env.normalize_obs / normalize_reward between the envs and the rollout
        self.normalizing = NormalizingTransform(config, gamma, n)
        # a recurrent actor's state per env: zero at an episode's start, carried across
        # rollouts (None for a feedforward actor)
        self.memory: np.ndarray | None = (np.zeros((n, actor.state_size), np.float32)
                                             if actor.recurrent else None)
        self.rollout: Rollout | None = None  # the one being filled
        self._noise = np.empty(0, np.float32)
        self._length = 0  # steps per recurrent sequence (the rollout's, when not cut)
        # bootstrap values of the episodes truncated during the rollout: step -> (envs, values)
        self._final_values: dict[int, tuple[np.ndarray, np.ndarray]] = {}

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
        self._length = buffer.layout.sequence_length or steps
        norm = self.normalizing
        raw_obs = (self.core.raw_buffer("obs", buffer.obs.shape, buffer.obs.dtype)
                   if norm.normalizes_obs else buffer.obs)
        raw_rewards = (self.core.raw_buffer("rewards", buffer.rewards.shape,
                                            buffer.rewards.dtype)
                       if norm.normalizes_reward else buffer.rewards)
        return steps, raw_obs, raw_rewards

    def act(self, t: int, obs: np.ndarray) -> np.ndarray:
        """Step ``t``'s actions on ``obs`` (as the envs returned it), the rollout's
        observation, action, log-prob and value written; returns the actions as the env
        takes them (clipped to its bounds, or its integer type)."""
        rollout = self.rollout
        assert rollout is not None
        if self.normalizing.normalizes_obs:
            rollout.obs[t] = self.normalizing.observation(obs)
        if self.memory is not None and t % self._length == 0:  # where a sequence starts
            rollout.memory[t // self._length] = self.memory
        actions, log_probs, values, memory = self.engine.step(rollout.obs[t], self._noise[t],
                                                              self.memory)
        if memory is not None:
            self.memory = memory
        if self.replay is not None:  # PPO+D: replay slots take the demonstrated action
            slots, replayed = self.replay.replayed_actions()
            actions = actions.copy()
            actions[slots] = replayed
        rollout.actions[t] = actions
        rollout.log_probs[t] = log_probs
        rollout.values[t] = values
        if self.clip_low is not None:
            return np.clip(actions, self.clip_low, self.clip_high)
        if self.env_dtype is not None:
            return actions.astype(self.env_dtype)
        return actions

    def record(self, step: StepFacts) -> None:
        """Write step ``t``'s rewards (normalised when asked) and episode ends; a truncated
        episode's value is taken on its final observation, to bootstrap from."""
        rollout, t = self.rollout, step.t
        assert rollout is not None
        rollout.rewards[t] = self.normalizing.reward(step.rewards)
        rollout.terminated[t] = step.terminated
        rollout.truncated[t] = step.truncated
        if step.final_obs is not None:  # of the truncated episodes alone
            envs = step.final_envs
            final = self.normalizing.observation(step.final_obs)
            state = None if self.memory is None else self.memory[envs]
            self._final_values[t] = (envs, self.engine.value(final, state))

    def end_episodes(self, t: int, done: np.ndarray, returns: np.ndarray,
                     lengths: np.ndarray) -> None:
        """The episodes ``done`` ended at step ``t``: their game return and length go into
        the rollout (a PPO+D replay slot's none: a replayed episode is no episode of the
        agent's), their discounted returns and recurrent states start again."""
        rollout = self.rollout
        assert rollout is not None
        rollout.episode_returns[t], rollout.episode_lengths[t] = returns, lengths
        if self.replay is not None:
            rollout.episode_lengths[t, self.replay.replay_index] = 0
        self.normalizing.end_episodes(done)
        if self.memory is not None:
            self.memory[done] = 0.0  # the next observation starts an episode

    def finish(self, steps: int, raw_obs: np.ndarray, facts: CollectionFacts) -> Rollout:
        """Close the rollout after ``steps`` steps: ``next_values`` per
        :func:`hpcrl.returns.gae`'s contract, the normaliser moments of the raw
        observations, and its header."""
        rollout = self.rollout
        assert rollout is not None
        last = self.normalizing.observation(self.core.obs)
        rollout.next_values[:steps - 1] = rollout.values[1:steps]
        rollout.next_values[steps - 1] = self.engine.value(last, self.memory)
        if rollout.layout.last_obs:
            rollout.last_obs[:] = last
        rollout.next_values[:steps][rollout.terminated[:steps] > 0] = 0.0
        for t, (envs, values) in self._final_values.items():
            rollout.next_values[t, envs] = values
        rollout.set_moments(*self.normalizing.moments(raw_obs))
        rollout.set_facts(steps, facts.weights_version, facts.env_offset, facts.source,
                          facts.seconds)
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
