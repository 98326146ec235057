"""The off-policy collector role: steps envs with the latest policy, emits transition chunks.

It explores as its algorithm does: uniformly random actions while the job has collected
fewer than ``replay.learning_starts`` env steps; then epsilon-greedy (DQN), sampling from the
squashed Gaussian (SAC) or the deterministic action plus exploration noise (TD3, DDPG).
Every random draw of env ``i`` of the job comes from its own generator seeded by
``(seed, i)``, so the transitions do not depend on how envs are spread over processes.
Steps pass through an n-step window; finished windows become the chunk's rows.

Under Ape-X's settings a DQN collector acts with its own fixed epsilon
(``algo.dqn.per_collector_eps``) and gives each row its initial replay priority, the
``|n-step TD error|`` under its copy of the Q-network (``algo.dqn.initial_priorities``).
"""
from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from hpcrl.config.algo_sections import DdpgConfig
from hpcrl.config.schema import Config
from hpcrl.core.acting import GreedyQEngine, SquashedGaussianEngine, make_engine
from hpcrl.core.envs import as_discrete
from hpcrl.core.epsilon import collector_epsilon, linear_epsilon
from hpcrl.core.exploration import make_noise, standard_normal
from hpcrl.core.flat import contiguous_parameters
from hpcrl.core.obs_format import obs_format
from hpcrl.core.replay.nstep import NStepWindow
from hpcrl.core.replay.transitions import TransitionLayout, Transitions
from hpcrl.roles.env_core import EnvCore
from hpcrl.roles.messages import Weights
from hpcrl.runtime.finite import check_env_rows, check_env_steps

COLLECT_STREAM = 0x0FF  # per-env generators, apart from the on-policy collector's


def chunk_layout(config: Config, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                 num_envs: int, obs_dtype: str = "float32") -> TransitionLayout:
    """A layout big enough for the longest chunk of this config: one training interval
    (or one update) of steps, plus the windows an n-step window may flush."""
    steps = min(config.replay.train_freq, config.algo.num_steps)
    return _layout(config, obs_shape, action_shape, num_envs, steps, obs_dtype)


def stream_layout(config: Config, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                  num_envs: int, obs_dtype: str = "float32") -> TransitionLayout:
    """The layout of the chunks a collector rank streams: ``algo.num_steps`` steps each."""
    return _layout(config, obs_shape, action_shape, num_envs, config.algo.num_steps,
                   obs_dtype)


def _layout(config: Config, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
            num_envs: int, steps: int, obs_dtype: str) -> TransitionLayout:
    """Chunks of ``steps`` steps per env, plus the windows an n-step window may flush;
    observations in ``obs_dtype`` (the carried dtype of the env's observation format)."""
    return TransitionLayout((steps + config.replay.n_step - 1) * num_envs, obs_shape,
                            action_shape, config.algo.dqn.initial_priorities == "collector",
                            obs_dtype, streams=config.replay.her_strategy != "none")


def exploration_noise_keys(config: Config) -> DdpgConfig:
    """The action-noise keys of a deterministic policy: its algorithm's own section (TD3's
    or DDPG's, or a plug-in's of them). A deterministic plug-in that derives from
    ``hpcrl.OffPolicyAlgorithm`` directly has no noise section (validation refuses
    ``algo.ddpg`` for it), so it explores with DDPG's default noise; deriving from
    ``hpcrl.DDPG`` makes the keys its own."""
    own = config.algo.own
    return own if isinstance(own, DdpgConfig) else DdpgConfig()


class TransitionCollector:
    """Holds ``envs`` (global indices ``env_offset ..``) and fills :class:`Transitions`.

    ``total_envs`` is the number of envs of the whole job: each vector step of this
    collector is counted as ``total_envs`` job env steps, which drive the random warm-up
    and the epsilon schedule the same way on every collector. ``collector_index`` of
    ``collector_count`` places it on Ape-X's per-collector epsilon schedule. ``acting``
    picks the actions (default: the numpy engine of ``policy``; an inference rank's remote
    engine in a scheme with inference ranks); the initial priorities are computed with
    ``policy`` here either way, one batched pass per chunk.
    """

    def __init__(self, envs: gym.vector.VectorEnv, policy: nn.Module, config: Config,
                 env_offset: int = 0, collector_id: int = 0,
                 total_envs: int | None = None, collector_index: int = 0,
                 collector_count: int = 1, acting: Any = None) -> None:
        self.envs, self.policy, self.config = envs, policy, config
        self.replay = config.replay
        self.env_offset, self.collector_id = env_offset, collector_id
        n = envs.num_envs
        self.num_envs = n
        self.total_envs = total_envs or n
        self.env_ids = env_offset + np.arange(n)  # global indices of this collector's envs
        contiguous_parameters(policy)  # new weights arrive as one copy
        self.engine = make_engine(policy)
        self.acting = acting if acting is not None else self.engine
        self.discrete = isinstance(self.engine, GreedyQEngine)
        self.sampling = isinstance(self.engine, SquashedGaussianEngine)
        space = envs.single_action_space
        self.num_actions = int(as_discrete(space).n) if self.discrete else 0
        self.action_dim = 0 if self.discrete else int(np.prod(space.shape or ()))
        engine = self.engine  # its policy is ``policy``, typed by the engine's kind
        self.scale = None if isinstance(engine, GreedyQEngine) else engine.policy.scale
        noise = exploration_noise_keys(config)
        self.noise = None if self.discrete or self.sampling else make_noise(
            noise.action_noise, n, self.action_dim, noise.noise_std, noise.ou_theta,
            noise.ou_dt)
        fmt = obs_format(envs.single_observation_space)
        action_shape = () if self.discrete else (self.action_dim,)
        self.window = NStepWindow(self.replay.n_step, config.algo.gamma, n, fmt.shape,
                                  action_shape, fmt.dtype)
        # epsilon-greedy's keys: DQN's section (a discrete off-policy plug-in runs as DQN)
        self.epsilon = config.algo.dqn
        self.fixed_eps = (collector_epsilon(collector_index, collector_count,
                                            self.epsilon.collector_eps_base,
                                            self.epsilon.collector_eps_alpha)
                          if self.epsilon.per_collector_eps else None)
        self.weights_version = 0
        # the envs, their generators, observations and episode trackers
        self.core = EnvCore(envs, fmt, config.seed, env_offset, self.total_envs,
                            stream=(COLLECT_STREAM,))

    @property
    def vector_steps(self) -> int:
        """Steps of this collector's vector env so far."""
        return self.core.vector_steps

    # -- weights -----------------------------------------------------------------------------
    def load_weights(self, weights: Weights) -> None:
        """Act with this version of the policy from now on."""
        weights.load_into(self.policy)  # in place: the engine's views see the new values
        self.weights_version = weights.version

    # -- acting ------------------------------------------------------------------------------
    def _draws(self, steps: int, random_phase: bool) -> dict[str, np.ndarray]:
        """Every random number the chunk may use, drawn per env in a fixed order."""
        draws: dict[str, np.ndarray] = {}
        rngs = self.core.rngs
        if self.discrete:
            draws["explore"] = np.stack([r.random(steps) for r in rngs], axis=1)
            draws["random"] = np.stack([r.integers(0, self.num_actions, steps)
                                        for r in rngs], axis=1)
            return draws
        if random_phase:
            draws["random"] = np.stack([r.uniform(-1.0, 1.0, (steps, self.action_dim))
                                        for r in rngs], axis=1).astype(np.float32)
        if self.sampling or self.noise is not None:
            draws["normal"] = standard_normal(rngs, steps, self.action_dim)
        return draws

    def _act(self, obs: np.ndarray, t: int, job_steps: int,
             draws: dict[str, np.ndarray]) -> np.ndarray:
        """Actions of step ``t`` of the chunk (env indices, or ``[-1, 1]`` Box actions)."""
        random_phase = job_steps < self.replay.learning_starts
        if self.discrete:
            if random_phase:
                return draws["random"][t]
            eps = self.fixed_eps
            if eps is None:
                eps = linear_epsilon(self.epsilon.exploration_initial_eps,
                                     self.epsilon.exploration_final_eps,
                                     self.epsilon.exploration_fraction,
                                     job_steps / self.config.train.total_env_steps)
            greedy = self.acting.act(obs)
            return np.where(draws["explore"][t] < eps, draws["random"][t], greedy)
        if self.sampling:
            return draws["random"][t] if random_phase else self.acting.act(obs, draws["normal"][t])
        actions = draws["random"][t] if random_phase else self.acting.act(obs)
        if self.noise is not None:
            actions = np.clip(actions + self.noise.step(draws["normal"][t]), -1.0, 1.0)
        return actions.astype(np.float32)

    def collect(self, chunk: Transitions, steps: int, job_env_steps: int) -> Transitions:
        """Step every env ``steps`` times into ``chunk`` (emptied first).

        ``job_env_steps`` counts the job's env steps before this chunk. What the envs
        returned is checked once, at the end (:meth:`_check`): a NaN or inf observation or
        reward stops the run before the chunk reaches a replay.
        """
        started = time.perf_counter()
        chunk.reset()
        draws = self._draws(steps, job_env_steps < self.replay.learning_starts)
        core = self.core
        obs = core.obs
        raw_obs = core.raw_buffer("obs", (steps,) + obs.shape, obs.dtype)
        raw_rewards = core.raw_buffer("rewards", (steps, self.num_envs), np.float32)
        finals: list[tuple[int, np.ndarray, np.ndarray]] = []  # of the episodes that ended
        for t in range(steps):
            actions = self._act(obs, t, job_env_steps + t * self.total_envs, draws)
            env_actions = actions if self.scale is None else self.scale.to_env(actions)
            next_obs, rewards, terminated, truncated, info = core.step(env_actions)
            raw_obs[t] = next_obs
            raw_rewards[t] = rewards
            done = terminated | truncated
            final = next_obs
            if done.any():
                final = next_obs.copy()
                ended = np.flatnonzero(done)
                final[ended] = core.final_observations(ended, info)
                finals.append((t, ended, final[ended]))
            rows = self.window.push(obs, actions, rewards, terminated, truncated, final)
            chunk.append(*rows, *self._streams(chunk, done))
            if done.any():
                returns, lengths = core.end_episodes(done, info)
                counted = lengths > 0  # a lost life is no episode of the game's statistics
                chunk.add_episodes(returns[counted], lengths[counted])
                if self.noise is not None:
                    self.noise.reset(done)
            obs = next_obs
        core.obs = obs
        self._check(raw_obs[:steps], raw_rewards[:steps], finals)
        core.vector_steps += steps
        if chunk.layout.priorities:
            self._priorities(chunk)
        chunk.set_facts(self.weights_version, self.env_offset, self.collector_id,
                        steps * self.num_envs, time.perf_counter() - started)
        return chunk

    def _streams(self, chunk: Transitions, done: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each row's global env index and episode end, for a chunk whose layout has
        streams (hindsight replay; with 1-step windows a step's rows are every env's, in
        env order), else nothing."""
        if not chunk.layout.streams:
            return ()
        if self.window.n != 1:
            raise ValueError("hindsight replay needs 1-step transitions (replay.n_step=1)")
        return self.env_ids, done

    def _check(self, raw_obs: np.ndarray, raw_rewards: np.ndarray,
               finals: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
        """Stop on a non-finite observation, reward or final observation of this chunk
        (``raw_*[t]`` came from vector step ``vector_steps + t + 1``)."""
        first = self.core.vector_steps + 1
        check_env_steps("observation", raw_obs, self.env_offset, first, self.total_envs)
        check_env_steps("reward", raw_rewards, self.env_offset, first, self.total_envs)
        check_env_rows("final observation", finals, self.env_offset, first, self.total_envs)

    def _priorities(self, chunk: Transitions) -> None:
        """Initial priorities of the chunk's rows: ``|r + discount * max_a Q(s', a) -
        Q(s, a)|`` under this collector's Q-network (one batched pass, numpy)."""
        k = chunk.count
        if k == 0:
            return
        engine = self.engine
        # algo.dqn.initial_priorities=collector is refused for any algo but dqn (validate)
        assert isinstance(engine, GreedyQEngine)
        q = engine.q_values(chunk.obs[:k])
        taken = q[np.arange(k), chunk.actions[:k].astype(np.int64)]
        bootstrap = engine.q_values(chunk.next_obs[:k]).max(axis=1)
        target = chunk.rewards[:k] + chunk.discounts[:k] * bootstrap
        chunk.priorities[:k] = np.abs(target - taken)

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Env states, generators, pending n-step windows, noise and episode trackers."""
        return {**self.core.state_dict(), "window": self.window.state_dict(),
                "noise": self.noise.state_dict() if self.noise is not None else {}}

    def load_state_dict(self, state: dict[str, Any]) -> list[str]:
        """Restore :meth:`state_dict`; returns the env attributes that could not be restored
        (those envs keep their fresh seeded reset, and their pending windows are dropped)."""
        inexact = self.core.load_generators(state)
        if self.noise is not None:
            self.noise.load_state_dict(state["noise"])
        if inexact:
            return inexact
        self.window.load_state_dict(state["window"])
        self.core.load_envs(state)
        return []
