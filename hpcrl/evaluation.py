"""Deterministic evaluation of a trained actor: mean and std of the episode return.

The actor runs where it lives (the learner's ``train.device`` at the end of training, the
device ``hpcrl eval --device`` names afterwards); the env and its observations stay on the
host, and each action comes back to it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.config.schema import Config
from hpcrl.core.actor import ActorCritic
from hpcrl.core.suites import make_env

EVAL_SEED_OFFSET = 1_000_003  # eval episodes never reuse the seeds of training envs


def run_episodes(actor: ActorCritic, config: Config, episodes: int,
                 seed: int | None = None) -> list[float]:
    """Returns of ``episodes`` episodes of one env, taking the actor's most likely actions.

    The env has the training env's preprocessing (``env.preset``) but plays whole games with
    the game's own rewards: no episode ends at a lost life, no reward is clipped."""
    env = make_env(config.env, whole_games=True)
    base = (config.seed if seed is None else seed) + EVAL_SEED_OFFSET
    box = isinstance(env.action_space, gym.spaces.Box)
    returns: list[float] = []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=base + i)
            total, done = 0.0, False
            while not done:
                with torch.inference_mode():
                    action = actor(obs).cpu().numpy()
                if box:
                    action = np.clip(action, env.action_space.low, env.action_space.high)
                elif action.ndim == 0:
                    action = int(action)
                else:  # MultiDiscrete, MultiBinary: the integers the space holds
                    action = action.astype(env.action_space.dtype)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns


def evaluate(actor: ActorCritic, config: Config, episodes: int,
             seed: int | None = None) -> dict[str, Any]:
    """``{"mean_return", "std_return", "episodes", "returns"}`` over deterministic episodes."""
    was_training = actor.training
    actor.eval()
    try:
        returns = run_episodes(actor, config, episodes, seed)
    finally:
        actor.train(was_training)
    return {"mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
            "episodes": episodes, "returns": returns}
