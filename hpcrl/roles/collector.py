"""The collector role: steps a vector of envs with a copy of the policy, fills rollouts.

Its randomness is per env: env ``i`` of the job draws its action noise from a generator
seeded by ``(seed, i)``, so a collector holding envs ``[a, b)`` produces exactly those
columns of the rollout that one collector holding every env would.

What the envs return is checked once per rollout (:func:`hpcrl.runtime.finite.check_env_steps`
on the raw observations and rewards in hand): a NaN or inf stops the run naming the env and
its step, before the rollout reaches a gradient or the normaliser.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.config.schema import EnvConfig
from hpcrl.core.acting import PolicyEngine, make_engine
from hpcrl.core.actor import ActorCritic
from hpcrl.core.demo_replay import DemoSlots
from hpcrl.core.envs import as_box
from hpcrl.core.rollout import Rollout
from hpcrl.roles.env_core import EnvCore
from hpcrl.roles.messages import Weights
from hpcrl.roles.normalizing import NormalizingTransform
from hpcrl.runtime.finite import check_env_rows, check_env_steps

StopCheck = Callable[[int], bool]


class Collector:
    """Holds ``envs`` (global indices ``env_offset ..`` of ``total_envs`` in the job, default
    its own) and fills :class:`Rollout` buffers.

    ``engine`` evaluates the policy (default: :func:`~hpcrl.core.acting.make_engine` of
    ``actor``; an inference rank's remote engine in a scheme with inference ranks, where
    ``actor`` then only keeps the normalisers that arrive with the weights)."""

    def __init__(self, envs: gym.vector.VectorEnv, actor: ActorCritic, config: EnvConfig,
                 gamma: float, seed: int, env_offset: int = 0, collector_id: int = 0,
                 total_envs: int | None = None,
                 engine: PolicyEngine | None = None) -> None:
        self.envs, self.actor, self.config = envs, actor, config
        self.env_offset, self.collector_id = env_offset, collector_id
        n = envs.num_envs
        self.num_envs = n
        self.total_envs = total_envs or n
        # (step, envs, final observations) of the episodes truncated during a rollout
        self._finals: list[tuple[int, np.ndarray, np.ndarray]] = []
        space = envs.single_action_space
        self.clip_low = None if actor.integer_actions else as_box(space).low.astype(np.float32)
        self.clip_high = (None if actor.integer_actions
                          else as_box(space).high.astype(np.float32))
        # integer components go to the env as the integers its space holds
        self.env_dtype = space.dtype if actor.integer_actions and not actor.discrete else None
        self.engine = engine if engine is not None else make_engine(actor)
        # PPO+D's replay slots (hpcrl.core.demo_replay), when the envs have them
        self.replay: DemoSlots | None = envs if isinstance(envs, DemoSlots) else None
        # env.normalize_obs / normalize_reward between the envs and the rollout
        self.normalizing = NormalizingTransform(config, gamma, n)
        self.weights_version = 0
        # the envs, their generators, observations and episode trackers
        self.core = EnvCore(envs, actor.obs_format, seed, env_offset, self.total_envs)
        # a recurrent actor's state per env: zero at an episode's start, carried across
        # rollouts (None for a feedforward actor)
        self.memory: np.ndarray | None = (np.zeros((n, actor.state_size), np.float32)
                                             if actor.recurrent else None)

    @property
    def vector_steps(self) -> int:
        """Steps of this collector's vector env so far."""
        return self.core.vector_steps

    # -- weights -----------------------------------------------------------------------------
    def load_weights(self, weights: Weights) -> None:
        """Collect from now on with this version of the policy."""
        weights.load_into(self.actor)
        self.follow(weights.version)

    def follow(self, version: int) -> None:
        """Collect from now on with the actor's current weights, version ``version`` (the
        actor is shared with the learner that just changed it)."""
        self.weights_version = version
        self.engine.sync()
        self.normalizing.sync(self.actor)

    # -- collection --------------------------------------------------------------------------
    def _draw_noise(self, steps: int) -> np.ndarray:
        dist = self.actor.distribution
        shape = (steps,) + dist.noise_shape()
        if dist.uniform_noise:
            cols = [rng.random(shape, dtype=np.float32) for rng in self.core.rngs]
        else:
            cols = [rng.standard_normal(shape, dtype=np.float32) for rng in self.core.rngs]
        return np.stack(cols, axis=1)

    def collect(self, rollout: Rollout, should_stop: StopCheck | None = None) -> Rollout:
        """Fill ``rollout`` with up to ``num_steps`` steps of every env.

        ``should_stop(steps_done)`` is asked after every step; when it says True the rollout
        ends early with ``valid_steps`` set to the steps done (DD-PPO preemption).
        """
        started = time.perf_counter()
        steps = rollout.layout.num_steps
        noise = self._draw_noise(steps)
        norm = self.normalizing
        norm.begin()
        norm_obs = norm.normalizes_obs  # raw observations kept apart for the check
        core = self.core
        obs = core.obs
        raw_obs = self._raw_like("obs", rollout.obs) if norm_obs else rollout.obs
        raw_rewards = (self._raw_like("rewards", rollout.rewards) if norm.normalizes_reward
                       else rollout.rewards)
        self._finals.clear()
        final_values: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        env_action_clip = self.clip_low is not None
        length = rollout.layout.sequence_length or steps
        done_steps = 0
        for t in range(steps):
            raw_obs[t] = obs
            if norm_obs:
                rollout.obs[t] = norm.observation(obs)
            if self.memory is not None and t % length == 0:  # where a sequence starts
                rollout.memory[t // length] = self.memory
            actions_np, log_probs, values, memory = self.engine.step(rollout.obs[t], noise[t],
                                                                     self.memory)
            if memory is not None:
                self.memory = memory
            if self.replay is not None:  # PPO+D: replay slots take the demonstrated action
                slots, replayed = self.replay.replayed_actions()
                actions_np = actions_np.copy()
                actions_np[slots] = replayed
            rollout.actions[t] = actions_np
            rollout.log_probs[t] = log_probs
            rollout.values[t] = values
            if env_action_clip:
                actions_np = np.clip(actions_np, self.clip_low, self.clip_high)
            elif self.env_dtype is not None:
                actions_np = actions_np.astype(self.env_dtype)
            obs, rewards, terminated, truncated, info = core.step(actions_np)
            raw_rewards[t] = rewards
            rollout.rewards[t] = norm.reward(rewards)
            rollout.terminated[t] = terminated
            rollout.truncated[t] = truncated
            done = terminated | truncated
            if done.any():
                self._end_episodes(rollout, t, done, terminated, truncated, info, final_values)
            done_steps = t + 1
            if should_stop is not None and done_steps < steps and should_stop(done_steps):
                break
        core.obs = obs
        self._check(raw_obs[:done_steps], raw_rewards[:done_steps])
        core.vector_steps += done_steps
        self._bootstrap(rollout, done_steps, final_values)
        rollout.set_moments(*norm.moments(raw_obs[:done_steps]))
        rollout.set_facts(done_steps, self.weights_version, self.env_offset, self.collector_id,
                          time.perf_counter() - started)
        return rollout

    def _raw_like(self, name: str, like: np.ndarray) -> np.ndarray:
        """A reused buffer shaped like ``like`` for the raw values the rollout stores
        normalised (the check and the normaliser moments need them as the env returned them)."""
        return self.core.raw_buffer(name, like.shape, like.dtype)

    def _check(self, raw_obs: np.ndarray, raw_rewards: np.ndarray) -> None:
        """Stop on a non-finite observation or reward of this rollout, the next observation,
        or a final observation of a truncated episode."""
        first, total = self.core.vector_steps, self.total_envs
        check_env_steps("observation", raw_obs, self.env_offset, first, total)
        check_env_steps("reward", raw_rewards, self.env_offset, first + 1, total)
        check_env_steps("observation", self.core.obs[None], self.env_offset,
                        first + len(raw_obs), total)
        check_env_rows("final observation", self._finals, self.env_offset, first + 1, total)

    def _end_episodes(self, rollout: Rollout, t: int, done: np.ndarray, terminated: np.ndarray,
                      truncated: np.ndarray, info: dict[str, Any],
                      final_values: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        rollout.episode_returns[t], rollout.episode_lengths[t] = self.core.end_episodes(done,
                                                                                        info)
        if self.replay is not None:  # a replayed episode is no episode of the agent's
            rollout.episode_lengths[t, self.replay.replay_index] = 0
        self.normalizing.end_episodes(done)
        cut = np.flatnonzero(truncated & ~terminated)
        if cut.size:
            final = self.core.final_observations(cut, info)
            self._finals.append((t, cut, final))
            final = self.normalizing.observation(final)
            state = None if self.memory is None else self.memory[cut]
            final_values[t] = (cut, self.engine.value(final, state))
        if self.memory is not None:
            self.memory[done] = 0.0  # the next observation starts an episode

    def _bootstrap(self, rollout: Rollout, steps: int,
                   final_values: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """``next_values`` per :func:`hpcrl.returns.gae`'s contract."""
        last = self.normalizing.observation(self.core.obs)
        rollout.next_values[:steps - 1] = rollout.values[1:steps]
        rollout.next_values[steps - 1] = self.engine.value(last, self.memory)
        if rollout.layout.last_obs:
            rollout.last_obs[:] = last
        rollout.next_values[:steps][rollout.terminated[:steps] > 0] = 0.0
        for t, (envs, values) in final_values.items():
            rollout.next_values[t, envs] = values

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: env states, noise generators, trackers."""
        return {**self.core.state_dict(),
                **self.normalizing.state_dict(),
                **({} if self.replay is None else {"demo_replay": self.replay.replay_state()}),
                **({} if self.memory is None
                   else {"memory": torch.from_numpy(self.memory.copy())})}

    def load_state_dict(self, state: dict[str, Any]) -> list[str]:
        """Restore :meth:`state_dict`; returns the env attributes that could not be restored
        (their envs keep the fresh seeded reset instead)."""
        inexact = self.core.load_generators(state)
        if inexact:
            return inexact
        self.normalizing.load_state_dict(state)
        self.core.load_envs(state)
        if self.replay is not None:
            self.replay.load_replay_state(state["demo_replay"])
        if self.memory is not None:
            if "memory" not in state or tuple(state["memory"].shape) != self.memory.shape:
                raise ValueError("the checkpoint holds no recurrent state of this actor's size "
                                 "for its envs: actor.memory changed since it was written")
            self.memory = state["memory"].numpy().copy()
        return []
