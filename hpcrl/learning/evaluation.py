"""Deterministic evaluation of a trained actor: mean and std of the episode return.

The actor runs where it lives (the learner's ``train.device`` at the end of training, the
device ``hpcrl eval --device`` names afterwards); the env and its observations stay on the
host, and each action comes back to it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.envs.make import make_env
from hpcrl.envs.obs_format import ObsFormat, obs_format
from hpcrl.envs.restarts import IN_PLACE, EnvRestartsExhausted, describe_error, fresh_seed
from hpcrl.errors import ConfigError
from hpcrl.sections.schema import EnvConfig

EVAL_SEED_OFFSET = 1_000_003  # eval episodes never reuse the seeds of training envs


MAX_PARALLEL_EPISODES = 32  # envs stepped together; more episodes run in waves


def _batch(observations: list[Any], fmt: ObsFormat) -> Any:
    """Raw observations of several envs as one batch a policy takes: stacked arrays, or the
    carried rows of ``Tuple`` and ``Dict`` observations."""
    if isinstance(observations[0], (tuple, dict)):
        return fmt.carry_each(observations)
    return np.stack([np.asarray(o) for o in observations])


def _env_action(action: np.ndarray, space: gym.Space) -> Any:
    """One env's action as its space takes it."""
    if isinstance(space, gym.spaces.Box):
        return np.clip(action, space.low, space.high)
    if action.ndim == 0:
        return int(action)
    return action.astype(space.dtype)  # MultiDiscrete, MultiBinary: the integers it holds


DEFAULT_MAX_EPISODE_STEPS = 27_000  # Atari's 108,000 frames at frame skip 4: 30 minutes
PROGRESS_EVERY_S = 10.0  # an evaluation that runs longer says how far it got this often


@dataclass
class Episodes:
    """What :func:`run_episodes` played: each episode's return, how many were cut at
    ``max_steps`` (``truncated``), and the steps played in all; ``successes``: each
    episode's ``info["is_success"]`` at its last step, for envs that report one (the
    goal-conditioned convention of Gymnasium-Robotics), else empty; ``restarts``: episodes
    played again because their env failed (:class:`EpisodesAgain`)."""

    returns: list[float]
    truncated: int
    max_steps: int
    steps: int
    successes: list[bool] = field(default_factory=list)
    restarts: int = 0  # episodes played again after their env failed


def episode_cap(max_episode_steps: int, env: gym.Env) -> int:
    """Steps after which an evaluation episode of ``env`` is cut: ``max_episode_steps``
    (``train.eval_max_episode_steps``) when above 0, else the env's own time limit, else
    :data:`DEFAULT_MAX_EPISODE_STEPS`."""
    if max_episode_steps > 0:
        return max_episode_steps
    own = env.spec.max_episode_steps if env.spec is not None else None
    return int(own) if own else DEFAULT_MAX_EPISODE_STEPS


class _Progress:
    """Progress lines of a long evaluation on ``console``: one every
    :data:`PROGRESS_EVERY_S` seconds, none for an evaluation that ends sooner."""

    def __init__(self, console: IO[str] | None, episodes: int) -> None:
        self.console, self.episodes = console, episodes
        self.start = self.last = time.monotonic()

    def __call__(self, done: int, steps: int) -> None:
        now = time.monotonic()
        if self.console is None or now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        print(f"eval: {done} of {self.episodes} episodes done, {steps:,} steps in "
              f"{now - self.start:.0f} s", file=self.console, flush=True)


StepHook = Callable[[int, Any, Any, float, bool, bool], None]


def run_episodes(actor: torch.nn.Module, env: EnvConfig, episodes: int, seed: int,
                 max_episode_steps: int = 0,
                 on_frame: Callable[[gym.Env], None] | None = None,
                 console: IO[str] | None = None,
                 on_step: StepHook | None = None) -> Episodes:
    """``episodes`` episodes of the envs of ``env`` (the run's env section) taking the
    actor's most likely actions.

    Episode ``i`` is played from ``reset(seed=base + i)`` (``base``: ``seed``, the run's
    seed for its own evaluations, plus :data:`EVAL_SEED_OFFSET`) whatever else runs, so the
    returns do not depend on how episodes are grouped. Up to :data:`MAX_PARALLEL_EPISODES` envs play
    at once and the actor takes all their observations in one batch (one forward per step,
    not one per env and step). The envs have the training env's preprocessing
    (``env.preset``) but play whole games with the game's own rewards: no episode ends at a
    lost life, no reward is clipped. A recurrent actor's state is carried through each
    episode, from zeros at its start. An episode still going after :func:`episode_cap` steps
    (``max_episode_steps``, 0: the env's own limit) is cut there and counted as truncated:
    a deterministic policy may never end one.

    ``on_frame(env)`` (a video) makes the episodes play one after the other in an env made
    with ``render_mode="rgb_array"``, called after its reset and after each step.
    ``console``: where a long evaluation says how far it got. ``on_step(episode, obs,
    action, reward, terminated, truncated)`` sees every step: the observation acted on, the
    env action, and how the step ended its episode (``truncated`` also where it was cut):
    what :class:`~hpcrl.buffers.demos.files.DemoRecorder` records."""
    if episodes <= 0:
        return Episodes([], 0, 0, 0)
    env_config, parallel = env, MAX_PARALLEL_EPISODES
    if on_frame is not None:
        env_config = replace(env, kwargs={**env.kwargs, "render_mode": "rgb_array"})
        parallel = 1
    play = _Slots(actor, env_config, episodes, parallel, seed + EVAL_SEED_OFFSET,
                  max_episode_steps, on_frame, on_step)
    progress = _Progress(console, episodes)
    try:
        while play.going():
            play.start_episodes()
            slots = sorted(play.playing)
            play.step(slots, play.act(slots))
            progress(play.next_episode - len(play.playing), play.steps)
    finally:
        play.close()
    return play.played()


class _Slots:
    """The envs of one :func:`run_episodes` call and the episodes they play, one at a time
    in each env slot: a phase a method (episodes started in the free slots, one batched
    forward of the actor, a step of every playing slot), which :func:`run_episodes` drives.

    ``config``: the env section the envs are made from (``render_mode`` set for a video);
    ``parallel``: at most so many envs; ``base``: the seed of episode 0."""

    def __init__(self, actor: torch.nn.Module, config: EnvConfig, episodes: int,
                 parallel: int, base: int, max_episode_steps: int,
                 on_frame: Callable[[gym.Env], None] | None,
                 on_step: StepHook | None) -> None:
        self.actor, self.episodes, self.base = actor, episodes, base
        self.on_frame, self.on_step = on_frame, on_step
        self.envs = [make_env(config, whole_games=True) for _ in range(min(episodes, parallel))]
        # a game of agents sharing the policy (env.agents=shared) observes and acts one row
        # per agent: the actor takes every row of every env in one batch
        self.rows = int(getattr(self.envs[0].unwrapped, "agent_rows", 1))
        if self.rows > 1 and on_step is not None:
            raise ConfigError(f"env '{config.id}' plays {self.rows} agents at once "
                              f"(env.agents=shared); demonstrations are recorded from "
                              f"single-agent envs: evaluate without --record")
        self.space = self.envs[0].action_space
        self.fmt = obs_format(self.envs[0].observation_space)
        self.cap = episode_cap(max_episode_steps, self.envs[0])
        self.returns = [0.0] * episodes
        self.playing: dict[int, tuple[int, Any]] = {}  # env slot -> (episode, its last obs)
        self.lengths = [0] * len(self.envs)  # steps of the episode each slot plays
        recurrent = bool(getattr(actor, "recurrent", False))
        # one row per env slot and agent (an actor is recurrent when it carries a state from
        # step to step: an ActorCritic with a memory core, or MPC's planning policy with its
        # plans)
        initial_state = getattr(actor, "initial_state", None) if recurrent else None
        self.states = (initial_state(len(self.envs) * self.rows) if initial_state is not None
                       else None)
        self.successes: dict[int, bool] = {}  # episode -> is_success at its last step
        self.next_episode = self.truncated = self.steps = 0
        # an env that fails: its episode played again (the list of envs is shared)
        self.again = EpisodesAgain(config, self.envs, episodes)

    def going(self) -> bool:
        """Whether an episode is still to start, to finish or to play again."""
        return bool(self.next_episode < self.episodes or self.playing or self.again.waiting)

    def start_episodes(self) -> None:
        """Reset every free slot's env for the next episode (one to play again first)."""
        for slot in range(len(self.envs)):
            if slot in self.playing or not (self.again.waiting
                                            or self.next_episode < self.episodes):
                continue
            episode = self.again.waiting.pop() if self.again.waiting else self.next_episode
            self.next_episode += int(episode == self.next_episode)
            try:
                obs, _ = self.envs[slot].reset(seed=self.again.seed(self.base, episode))
            except Exception as err:
                self.again.failed(slot, episode, err, "reset")
                continue
            self.playing[slot] = (episode, obs)
            self.returns[episode] = 0.0
            self.lengths[slot] = 0
            if self.on_frame is not None:
                self.on_frame(self.envs[slot])
            if self.states is not None:
                self.states[slot * self.rows:(slot + 1) * self.rows] = 0.0

    def act(self, slots: list[int]) -> np.ndarray:
        """The actor's actions for the last observations of ``slots``, in one forward (a
        recurrent actor's state rows of those slots carried on)."""
        rows = self.rows
        with torch.inference_mode():
            batch = _batch([self.playing[s][1] for s in slots], self.fmt)
            if rows > 1:  # every agent's row of every env: [envs * agents, ...]
                batch = np.asarray(batch)
                batch = batch.reshape(-1, *batch.shape[2:])
            if self.states is None:
                out = self.actor(batch).cpu().numpy()
            else:
                index = torch.tensor([s * rows + k for s in slots for k in range(rows)],
                                     device=self.states.device)
                acted, new = self.actor(batch, self.states[index])
                self.states[index] = new
                out = acted.cpu().numpy()
        return out.reshape(len(slots), rows, *out.shape[1:]) if rows > 1 else out

    def step(self, slots: list[int], actions: np.ndarray) -> None:
        """Step the env of each of ``slots`` with its action."""
        for slot, action in zip(slots, actions, strict=True):
            self._step_slot(slot, action)

    def _step_slot(self, slot: int, action: np.ndarray) -> None:
        """One step of the env of ``slot``: its return and counts, its episode ended where
        the env ended it or the cap cuts it, played again where the env raised."""
        episode, seen = self.playing[slot]
        env_action = _env_action(action, self.space)
        try:
            obs, reward, terminated, truncated_here, info = self.envs[slot].step(env_action)
        except Exception as err:
            del self.playing[slot]
            self.again.failed(slot, episode, err, "step")
            return
        self.returns[episode] += float(reward)
        self.lengths[slot] += 1
        self.steps += 1
        if self.on_frame is not None:
            self.on_frame(self.envs[slot])
        cut = self.lengths[slot] >= self.cap and not (terminated or truncated_here)
        if self.on_step is not None:
            self.on_step(episode, seen, env_action, float(reward), bool(terminated),
                         bool(truncated_here or cut))
        if terminated or truncated_here or cut:
            if "is_success" in info:
                self.successes[episode] = bool(info["is_success"])
            del self.playing[slot]
            self.truncated += int(cut)
        else:
            self.playing[slot] = (episode, obs)

    def close(self) -> None:
        """Close every env (those made again included)."""
        for played in self.envs:
            played.close()

    def played(self) -> Episodes:
        """What the episodes came to."""
        successes, episodes = self.successes, self.episodes
        reported = [successes[i] for i in range(episodes)] if len(successes) == episodes else []
        return Episodes(self.returns, self.truncated, self.cap, self.steps, reported,
                        self.again.restarts)


class EpisodesAgain:
    """Evaluation's side of envs that come back (:mod:`hpcrl.envs.restarts`): an
    episode whose env raised in step or reset is played again from its start, in an env
    made again and reset with a fresh seed, at most ``env.max_restarts`` times in a row
    (``config``: the env section; 0: the error ends the evaluation)."""

    def __init__(self, config: EnvConfig, envs: list[gym.Env], episodes: int) -> None:
        self.config, self.envs = config, envs
        self.tries = [0] * episodes  # each episode's failed plays
        self.waiting: list[int] = []  # episodes to play again
        self.restarts = 0

    def seed(self, base: int, episode: int) -> int:
        """Episode ``episode``'s seed: ``base + episode``, a fresh one when played again."""
        tries = self.tries[episode]
        return base + episode if tries == 0 else fresh_seed(base + episode, IN_PLACE, tries)

    def failed(self, slot: int, episode: int, err: Exception, where: str) -> None:
        """The env of ``slot`` raised ``err`` in ``where`` during ``episode``: make it again
        and play the episode again, or re-raise past ``env.max_restarts``."""
        self.tries[episode] += 1
        if self.config.max_restarts <= 0:
            raise err
        if self.tries[episode] > self.config.max_restarts:
            raise EnvRestartsExhausted(
                f"evaluation episode {episode}'s env failed {self.tries[episode]} times, made "
                f"again each time (env.max_restarts={self.config.max_restarts}); its last "
                f"error: {describe_error(err)} (in {where})") from err
        try:
            self.envs[slot].close()
        except Exception:
            pass
        self.envs[slot] = make_env(self.config, whole_games=True)
        self.waiting.append(episode)
        self.restarts += 1


def evaluate(actor: torch.nn.Module, env: EnvConfig, episodes: int, seed: int,
             max_episode_steps: int = 0,
             on_frame: Callable[[gym.Env], None] | None = None,
             console: IO[str] | None = None,
             on_step: StepHook | None = None) -> dict[str, Any]:
    """``{"mean_return", "std_return", "episodes", "returns", "truncated",
    "max_episode_steps"}`` over deterministic episodes of ``env`` from ``seed``
    (``truncated``: how many were cut at ``max_episode_steps``; the arguments: see
    :func:`run_episodes`), and ``"success_rate"`` where the env reports
    ``info["is_success"]`` at the end of every episode."""
    was_training = actor.training
    actor.eval()
    try:
        played = run_episodes(actor, env, episodes, seed, max_episode_steps, on_frame, console,
                              on_step)
    finally:
        actor.train(was_training)
    return {"mean_return": float(np.mean(played.returns)),
            "std_return": float(np.std(played.returns)), "episodes": episodes,
            "returns": played.returns, "truncated": played.truncated,
            "max_episode_steps": played.max_steps,
            **({"success_rate": float(np.mean(played.successes))} if played.successes
               else {}),
            **({"env_restarts": played.restarts} if played.restarts else {})}


def success_note(result: dict[str, Any]) -> str:
    """``, success rate 0.95`` for an evaluation whose env reports successes, else ``""``:
    said beside the mean return (a goal task's sparse return says less)."""
    rate = result.get("success_rate")
    return "" if rate is None else f", success rate {rate:.2f}"


def truncation_note(result: dict[str, Any], option: str) -> str:
    """`` (3 of 10 episodes cut at 27,000 steps: OPTION)`` when the evaluation ``result``
    cut episodes, else ``""``: said beside the mean return, whose episodes those were."""
    cut = result.get("truncated", 0)
    if not cut:
        return ""
    return (f" ({cut} of {result['episodes']} episodes cut at "
            f"{result['max_episode_steps']:,} steps: {option})")
