"""What an off-policy collection makes of its steps: transition chunks for a replay.

The one collection loop (:class:`hpcrl.collection.collector.Collector`) steps the envs; this
filler explores as its algorithm declares (``Capabilities.exploration``, read through
:data:`~hpcrl.collection.exploring.EXPLORATIONS`): uniformly random actions while the job has
collected fewer than ``replay.learning_starts`` env steps; then epsilon-greedy (DQN),
sampling from the squashed Gaussian (SAC), the deterministic action plus exploration noise
(TD3, DDPG) or planning over the newest world model (MPC). It acts through the engine its
policy's class declares (:func:`~hpcrl.models.acting.make_engine`), which keeps what the
policy carries between steps for each env (a planner's plans and noise streams). Every
random draw of env ``i`` of the job comes from its own generators seeded by ``(seed, i)``,
so the transitions do not depend on how envs are spread over processes.
Steps pass through an n-step window; finished windows become the chunk's rows.

Under Ape-X's settings a DQN collector acts with its own fixed epsilon
(``algo.dqn.per_collector_eps``) and gives each row its initial replay priority, the
``|n-step TD error|`` under its copy of the Q-network (``algo.dqn.initial_priorities``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from hpcrl.algorithms import algorithm_type
from hpcrl.algorithms.own_section import own_section
from hpcrl.buffers.replay.nstep import NStepWindow
from hpcrl.buffers.replay.transitions import TransitionLayout, Transitions
from hpcrl.collection.env_core import CollectionFacts, EnvCore, StepFacts
from hpcrl.collection.exploring import EXPLORATIONS
from hpcrl.envs.groups import EnvGroup
from hpcrl.models.acting import ActedEnvs, Engine, QValueEngine, make_engine
from hpcrl.numerics.flat import contiguous_parameters
from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.schema import AlgoConfig, EnvConfig, TrainConfig

COLLECT_STREAM = 0x0FF  # per-env generators, apart from the on-policy collector's


@dataclass(frozen=True)
class TransitionSections:
    """The config sections a transition collector reads, and no others: ``env`` (its
    restart budget), ``replay`` and ``algo`` (n-step returns, priorities, exploration),
    ``train`` (the budget exploration schedules over) and the run's ``seed``."""

    env: EnvConfig
    replay: ReplayConfig
    algo: AlgoConfig
    train: TrainConfig
    seed: int


def chunk_layout(replay: ReplayConfig, algo: AlgoConfig, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], num_envs: int,
                 obs_dtype: str = "float32") -> TransitionLayout:
    """A layout big enough for the longest chunk of the sections ``replay`` and ``algo``:
    one training interval (or one update) of steps, plus the windows an n-step window may
    flush."""
    steps = min(replay.train_freq, algo.num_steps)
    return _layout(replay, algo, obs_shape, action_shape, num_envs, steps, obs_dtype)


def stream_layout(replay: ReplayConfig, algo: AlgoConfig, obs_shape: tuple[int, ...],
                  action_shape: tuple[int, ...], num_envs: int,
                  obs_dtype: str = "float32") -> TransitionLayout:
    """The layout of the chunks a collector rank streams: ``algo.num_steps`` steps each."""
    return _layout(replay, algo, obs_shape, action_shape, num_envs, algo.num_steps, obs_dtype)


def _layout(replay: ReplayConfig, algo: AlgoConfig, obs_shape: tuple[int, ...],
            action_shape: tuple[int, ...], num_envs: int, steps: int,
            obs_dtype: str) -> TransitionLayout:
    """Chunks of ``steps`` steps per env, plus the windows an n-step window may flush;
    observations in ``obs_dtype`` (the carried dtype of the env's observation format)."""
    return TransitionLayout((steps + replay.n_step - 1) * num_envs, obs_shape,
                            action_shape, collector_priorities(algo),
                            obs_dtype, streams=replay.her_strategy != "none")


def collector_priorities(algo: AlgoConfig) -> bool:
    """Whether the collectors of the section ``algo`` compute their rows' initial replay
    priorities (the algorithm's class says, from its own section: DQN's
    ``initial_priorities``)."""
    return algorithm_type(algo.name).collector_priorities(own_section(algo))


class TransitionFiller:
    """Fills :class:`Transitions` chunks of ``core``'s envs with ``policy``'s exploration.

    It reads the sections ``replay`` and ``algo`` (its algorithm's own keys among them),
    the run's ``seed`` and ``train``'s budget (the epsilon schedule's length).
    ``core.total_envs`` is the number of envs of the whole job: each vector step is counted
    as that many job env steps, which drive the random warm-up and the epsilon schedule the
    same way on every collector. ``collector_index`` of ``collector_count`` places it on
    Ape-X's per-collector epsilon schedule. ``acting`` picks the actions (default: the numpy
    engine of ``policy``; an inference rank's remote engine in a scheme with inference
    ranks); the initial priorities are computed with ``policy`` here either way, one batched
    pass per chunk.
    """

    # every row's next observation is its episode's true final one, terminated or not
    finals_of_terminated = True

    def __init__(self, core: EnvCore, policy: nn.Module, replay: ReplayConfig,
                 algo: AlgoConfig, seed: int, train: TrainConfig,
                 collector_index: int = 0, collector_count: int = 1,
                 acting: Engine | None = None) -> None:
        self.core, self.policy = core, policy
        self.replay, self.total_env_steps = replay, train.total_env_steps
        n = core.num_envs
        self.env_ids = core.env_offset + np.arange(n)  # global indices of the envs
        contiguous_parameters(policy)  # new weights arrive as one copy
        # the engine the policy's class declares, and the exploration its algorithm does
        self.engine: Engine = make_engine(
            policy, envs=ActedEnvs(seed, core.env_offset, n, [g.cols for g in core.groups]))
        self.acting: Engine = acting if acting is not None else self.engine
        kind = algorithm_type(algo.name).capabilities.exploration
        self.exploration = EXPLORATIONS[kind](algo, policy, core.envs.single_action_space, n,
                                              collector_index, collector_count,
                                              train.total_env_steps)
        self.scale = self.exploration.scale
        fmt = core.obs_format
        action_shape = self.exploration.action_shape
        self.window = NStepWindow(self.replay.n_step, algo.gamma, n, fmt.shape,
                                  action_shape, fmt.dtype)
        self.chunk: Transitions | None = None  # the one being filled
        self._draws: dict[str, np.ndarray] = {}
        self._job_env_steps = 0  # the job's env steps before the chunk
        # each group's actions of its last step, as the policy chose them, and the step's
        # rows gathered group by group: the window takes a step whole, in env order, so
        # the chunk's rows do not depend on the grouping
        self._actions = np.zeros((n,) + action_shape, np.int64
                                 if self.exploration.integer_actions else np.float32)
        self._step: dict[str, np.ndarray] = {}
        self._recorded = 0  # groups of the current step recorded
        # hindsight replay: envs whose next row starts an episode after a failure cut the
        # one before (that one's last step gave no row to mark its end on)
        self._after_cut = np.zeros(n, bool)
        self._pending: dict[int, tuple[int, np.ndarray, np.ndarray | None]] = {}

    @property
    def module(self) -> nn.Module:
        """The policy the weights load into (in place: the engine's views see them)."""
        return self.policy

    def sync(self) -> None:
        """Nothing to re-take: the engine acts through views of the policy's weights."""

    # -- one collection ----------------------------------------------------------------------
    def begin(self, buffer: Transitions, steps: int | None, job_env_steps: int
              ) -> tuple[int, np.ndarray, np.ndarray]:
        """Start filling ``buffer`` (emptied first) with ``steps`` steps of every env (as
        many as it holds unless given); ``job_env_steps`` counts the job's env steps before
        it. Every random number the chunk may use is drawn here, per env in a fixed order;
        the loop gets reused buffers for the raw observations and rewards."""
        if steps is None:
            steps = buffer.layout.capacity // self.core.num_envs - (self.window.n - 1)
        buffer.reset()
        self.chunk = buffer
        self._job_env_steps = job_env_steps
        self._draws = self._draw(steps, job_env_steps < self.replay.learning_starts)
        core = self.core
        raw_obs = core.raw_buffer("obs", (steps,) + core.obs.shape, core.obs.dtype)
        raw_rewards = core.raw_buffer("rewards", (steps, core.num_envs), np.float32)
        return steps, raw_obs, raw_rewards

    def _draw(self, steps: int, random_phase: bool) -> dict[str, np.ndarray]:
        """Every random number a chunk of ``steps`` steps may use, drawn per env."""
        return self.exploration.draw(self.core.rngs, steps, random_phase)

    def request(self, t: int, group: EnvGroup, obs: np.ndarray) -> None:
        """Ask for step ``t``'s policy actions of ``group`` on ``obs``, unless the step
        explores at random (the warm-up before ``replay.learning_starts``)."""
        job_steps = self._job_env_steps + t * self.core.total_envs
        random_phase = job_steps < self.replay.learning_starts
        asked = not random_phase
        if asked:
            noise = self.exploration.policy_noise(self._draws, t, group.cols)
            self.acting.submit(group.index, obs, noise)
        self._pending[group.index] = (job_steps, obs, None) if asked else (job_steps, obs,
                                                                           np.empty(0))

    def take(self, t: int, group: EnvGroup) -> np.ndarray:
        """Step ``t``'s exploring actions of ``group``: the policy's (env indices, or
        ``[-1, 1]`` Box actions) are kept for the transition; returned as the env takes
        them."""
        job_steps, _, random = self._pending.pop(group.index)
        greedy = None if random is not None else self.acting.result(group.index).actions
        actions = self.exploration.choose(self._draws, t, group.cols, job_steps, greedy)
        self._actions[group.cols] = actions
        return actions if self.scale is None else self.scale.to_env(actions)

    def drop(self, group: EnvGroup) -> None:
        """Discard the answer to ``group``'s last request."""
        _, _, random = self._pending.pop(group.index)
        if random is None:
            self.acting.result(group.index)

    def record(self, step: StepFacts) -> None:
        """Keep one group's step ``t``; once every group's is there, push the whole step
        through the n-step window: the windows it finishes become rows that bootstrap from
        each episode's true final observation."""
        chunk = self.chunk
        assert chunk is not None
        cols, whole = step.cols, self._step
        if not whole:
            n = self.core.num_envs
            whole.update(obs=np.empty((n,) + step.obs.shape[1:], step.obs.dtype),
                         final=np.empty((n,) + step.next_obs.shape[1:], step.next_obs.dtype),
                         rewards=np.empty(n, step.rewards.dtype),
                         terminated=np.empty(n, bool), truncated=np.empty(n, bool),
                         done=np.empty(n, bool), cut=np.zeros(n, bool))
        whole["obs"][cols] = step.obs
        whole["cut"][cols] = False if step.cut is None else step.cut
        whole["final"][cols] = step.next_obs
        if step.final_obs is not None:
            whole["final"][cols][step.ended] = step.final_obs
        whole["rewards"][cols] = step.rewards
        whole["terminated"][cols], whole["truncated"][cols] = step.terminated, step.truncated
        whole["done"][cols] = step.done
        self._recorded += 1
        if self._recorded < len(self.core.groups):
            return
        self._recorded = 0
        cut = whole["cut"] if whole["cut"].any() else None
        if cut is not None:  # a failure cut these envs' episodes: their step is none
            ended = self.window.cut(cut, whole["obs"])  # truncated at their last obs
            if len(ended[2]):
                chunk.append(*ended)  # (n-step windows: no hindsight streams)
            self._after_cut |= cut
        rows = self.window.push(whole["obs"], self._actions, whole["rewards"],
                                whole["terminated"], whole["truncated"], whole["final"], cut)
        chunk.append(*rows, *self._streams(chunk, whole["done"], cut))

    def end_episodes(self, t: int, group: EnvGroup, done: np.ndarray, returns: np.ndarray,
                     lengths: np.ndarray) -> None:
        """The episodes ``done`` of ``group`` ended: the chunk keeps the game's ones (a lost
        life is no episode of the game's statistics); their exploration noise and plans
        start again."""
        chunk = self.chunk
        assert chunk is not None
        counted = lengths > 0
        chunk.add_episodes(returns[counted], lengths[counted])
        self.exploration.reset(done, group.cols)
        self.engine.reset(done, group.cols)

    def finish(self, steps: int, raw_obs: np.ndarray, facts: CollectionFacts) -> Transitions:
        """Close the chunk after ``steps`` steps: Ape-X's initial priorities when its layout
        keeps them, and its header."""
        chunk = self.chunk
        assert chunk is not None
        if chunk.layout.priorities:
            self._priorities(chunk)
        chunk.set_facts(facts.weights_version, facts.env_offset, facts.source,
                        steps * self.core.num_envs, facts.seconds, facts.env_restarts)
        self.chunk = None
        return chunk

    def _streams(self, chunk: Transitions, done: np.ndarray, cut: np.ndarray | None = None
                 ) -> tuple[np.ndarray, ...]:
        """Each row's global env index and episode flags, for a chunk whose layout has
        streams (hindsight replay; with 1-step windows a step's rows are every env's not
        ``cut``, in env order), else nothing. The flags: 1 where the row's episode ended,
        2 where it starts an episode after a cut one
        (:meth:`~hpcrl.buffers.replay.her.HerReplay.add`)."""
        if not chunk.layout.streams:
            return ()
        if self.window.n != 1:
            raise ValueError("hindsight replay needs 1-step transitions (replay.n_step=1)")
        keep = np.ones(len(done), bool) if cut is None else ~cut
        flags = done.astype(np.float32) + np.where(self._after_cut, 2.0, 0.0)
        self._after_cut &= ~keep
        return self.env_ids[keep], flags[keep]

    def _priorities(self, chunk: Transitions) -> None:
        """Initial priorities of the chunk's rows: ``|r + discount * max_a Q(s', a) -
        Q(s, a)|`` under this collector's Q-network (one batched pass, numpy)."""
        k = chunk.count
        if k == 0:
            return
        # validation refuses collector priorities unless the algorithm declares that it
        # acts through a Q-network (Capabilities.acting_q_values), whose engine gives Q-values
        engine = cast(QValueEngine, self.engine)
        q = engine.q_values(chunk.obs[:k])
        taken = q[np.arange(k), chunk.actions[:k].astype(np.int64)]
        bootstrap = engine.q_values(chunk.next_obs[:k]).max(axis=1)
        target = chunk.rewards[:k] + chunk.discounts[:k] * bootstrap
        chunk.priorities[:k] = np.abs(target - taken)

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The pending n-step windows, the exploration noise and a planner's plans, beside
        the env core's part of the checkpoint."""
        return {"window": self.window.state_dict(),
                "noise": self.exploration.state_dict(),
                "plans": self.engine.state_dict(),
                "after_cut": torch.from_numpy(self._after_cut.copy())}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool) -> None:
        """Restore :meth:`state_dict`: the noise always, the pending windows only when the
        envs were restored too (else they are dropped: every env starts afresh)."""
        self.exploration.load_state_dict(state["noise"])
        self.engine.load_state_dict(state["plans"], envs_restored)
        if envs_restored:
            self.window.load_state_dict(state["window"])
            if "after_cut" in state:  # (written since envs come back)
                self._after_cut[:] = state["after_cut"].numpy()
