"""Deterministic evaluation of a trained actor: mean and std of the episode return.

The actor runs where it lives (the learner's ``train.device`` at the end of training, the
device ``hpcrl eval --device`` names afterwards); the env and its observations stay on the
host, and each action comes back to it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
import torch

from hpcrl.config.schema import Config
from hpcrl.core.obs_format import ObsFormat, obs_format
from hpcrl.core.suites import make_env

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


def run_episodes(actor: torch.nn.Module, config: Config, episodes: int,
                 seed: int | None = None,
                 on_frame: Optional[Callable[[gym.Env], None]] = None) -> list[float]:
    """Returns of ``episodes`` episodes, taking the actor's most likely actions.

    Episode ``i`` is played from ``reset(seed=base + i)`` whatever else runs, so the returns
    do not depend on how episodes are grouped. Up to :data:`MAX_PARALLEL_EPISODES` envs play
    at once and the actor takes all their observations in one batch (one forward per step,
    not one per env and step). The envs have the training env's preprocessing
    (``env.preset``) but play whole games with the game's own rewards: no episode ends at a
    lost life, no reward is clipped. A recurrent actor's state is carried through each
    episode, from zeros at its start.

    ``on_frame(env)`` (a video) makes the episodes play one after the other in an env made
    with ``render_mode="rgb_array"``, called after its reset and after each step."""
    if episodes <= 0:
        return []
    base = (config.seed if seed is None else seed) + EVAL_SEED_OFFSET
    env_config, parallel = config.env, MAX_PARALLEL_EPISODES
    if on_frame is not None:
        env_config = replace(config.env, kwargs={**config.env.kwargs, "render_mode": "rgb_array"})
        parallel = 1
    envs = [make_env(env_config, whole_games=True) for _ in range(min(episodes, parallel))]
    space, fmt = envs[0].action_space, obs_format(envs[0].observation_space)
    returns = [0.0] * episodes
    playing: dict[int, tuple[int, Any]] = {}  # env slot -> (episode, its last observation)
    recurrent = bool(getattr(actor, "recurrent", False))
    states = actor.initial_state(len(envs)) if recurrent else None  # one row per env slot
    next_episode = 0
    try:
        while next_episode < episodes or playing:
            for slot in range(len(envs)):
                if slot not in playing and next_episode < episodes:
                    obs, _ = envs[slot].reset(seed=base + next_episode)
                    playing[slot] = (next_episode, obs)
                    next_episode += 1
                    if on_frame is not None:
                        on_frame(envs[slot])
                    if states is not None:
                        states[slot] = 0.0
            slots = sorted(playing)
            with torch.inference_mode():
                batch = _batch([playing[s][1] for s in slots], fmt)
                if states is None:
                    actions = actor(batch).cpu().numpy()
                else:
                    index = torch.tensor(slots, device=states.device)
                    out, new = actor(batch, states[index])
                    states[index] = new
                    actions = out.cpu().numpy()
            for slot, action in zip(slots, actions):
                episode = playing[slot][0]
                obs, reward, terminated, truncated, _ = envs[slot].step(
                    _env_action(action, space))
                returns[episode] += float(reward)
                if on_frame is not None:
                    on_frame(envs[slot])
                if terminated or truncated:
                    del playing[slot]
                else:
                    playing[slot] = (episode, obs)
    finally:
        for env in envs:
            env.close()
    return returns


def evaluate(actor: torch.nn.Module, config: Config, episodes: int,
             seed: int | None = None,
             on_frame: Optional[Callable[[gym.Env], None]] = None) -> dict[str, Any]:
    """``{"mean_return", "std_return", "episodes", "returns"}`` over deterministic episodes
    (``on_frame``: see :func:`run_episodes`)."""
    was_training = actor.training
    actor.eval()
    try:
        returns = run_episodes(actor, config, episodes, seed, on_frame)
    finally:
        actor.train(was_training)
    return {"mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
            "episodes": episodes, "returns": returns}
