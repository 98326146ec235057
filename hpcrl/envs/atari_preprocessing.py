"""The standard Atari preprocessing chain, built from Gymnasium's wrappers and two of hpcrl's.

Gymnasium's :class:`~gymnasium.wrappers.AtariPreprocessing` does the no-op starts, the frame
skip with max-pooling of the last two frames, the resize and the grayscale conversion;
:class:`~gymnasium.wrappers.FrameStackObservation` stacks frames,
:class:`~gymnasium.wrappers.ClipReward` clips rewards and
:class:`~gymnasium.wrappers.RecordEpisodeStatistics` records the whole-game score. Gymnasium
has no wrapper that presses FIRE after a reset, nor one that ends the *training* episode at a
lost life while the game goes on (its ``terminal_on_life_loss`` ends the game itself): those
are :class:`FireReset` and :class:`EpisodicLife` here. Both keep only plain attributes, so
:mod:`hpcrl.envs.state` captures them (the emulator itself cannot be captured: a resumed
Atari run resets its envs).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym

from hpcrl.sections.schema import EnvConfig

if TYPE_CHECKING:
    from ale_py.env import AtariEnv

LIFE_LOST = "life_lost"  # info key of a step that ended a life but not the game


def ale_env(env: gym.Env) -> AtariEnv:
    """The ALE env under ``env``'s wrappers (these wrappers are applied to ALE's ids only),
    for its ``ale`` interface and action meanings."""
    return cast("AtariEnv", env.unwrapped)


def _lives(env: gym.Env) -> int:
    return int(ale_env(env).ale.lives())


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode for the learner, but not the game: the next ``reset``
    only takes one no-op step, and the emulator is reset when the game is really over.

    A step that ends a life but not the game sets ``info["life_lost"] = True``, so that
    episode statistics (kept below this wrapper) are not cut at lives.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the game; a life lost while the game goes on ends the episode here
        (``terminated``) and is marked ``info['life_lost']``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = bool(terminated or truncated)
        lives = _lives(self.env)
        if 0 < lives < self.lives and not self.game_over:
            terminated = True
            info[LIFE_LOST] = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the emulator only when the game is over (or a seed is given); after a lost life,
        take one no-op step instead and go on from there."""
        if self.game_over or kwargs.get("seed") is not None:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = _lives(self.env)
        return obs, info


class FireReset(gym.Wrapper):
    """Presses FIRE (then UP, as the reference implementations do) after each reset, for
    games such as Breakout that wait for it; a reset that ends the game on the way starts
    again. With ``after_life_loss`` it also presses FIRE when a life is lost and the game
    goes on: whole games (evaluation) have no reset between lives, and a deterministic
    policy that never fires would wait until ALE's frame limit ends the game."""

    def __init__(self, env: gym.Env, after_life_loss: bool = False) -> None:
        super().__init__(env)
        meanings = ale_env(env).get_action_meanings()
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(f"FireReset needs FIRE as action 1, got actions {meanings}")
        self.after_life_loss = after_life_loss
        self.lives = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset, then press FIRE and action 2, resetting again if either ends the game."""
        obs, info = self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        self.lives = ale_env(self.env).ale.lives()
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step; with ``after_life_loss``, press FIRE after a lost life that does not end the game
        (its reward added to the step's)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = ale_env(self.env).ale.lives()
        if self.after_life_loss and lives < self.lives and not (terminated or truncated):
            obs, extra, terminated, truncated, info = self.env.step(1)
            reward = float(reward) + float(extra)
        self.lives = lives
        return obs, float(reward), terminated, truncated, info


def has_fire(env: gym.Env) -> bool:
    """Whether the game waits for FIRE (action 1), as :class:`FireReset` needs."""
    meanings = ale_env(env).get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def atari_env(config: EnvConfig, whole_games: bool = False) -> gym.Env:
    """The Atari chain of ``config.atari`` around ``config.id``.

    Training envs (``whole_games=False``) end episodes at lost lives and clip rewards as
    configured, and report each whole game's unclipped score and length in
    ``info["episode"]`` (``{"r", "l"}``, Gymnasium's convention). Evaluation envs
    (``whole_games=True``) play whole games with the game's own rewards.
    """
    a = config.atari
    kwargs: dict[str, Any] = {**config.kwargs, "frameskip": 1}
    if a.repeat_action_probability is not None:
        kwargs["repeat_action_probability"] = a.repeat_action_probability
    env = gym.make(config.id, **kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=a.noop_max, frame_skip=a.frame_skip, screen_size=a.screen_size,
        terminal_on_life_loss=False, grayscale_obs=a.grayscale, scale_obs=False)
    life_loss = a.terminal_on_life_loss and not whole_games
    clip = a.clip_reward and not whole_games
    if life_loss or clip:
        env = gym.wrappers.RecordEpisodeStatistics(env)
    if life_loss:
        env = EpisodicLife(env)
    if a.fire_reset and has_fire(env):
        env = FireReset(env, after_life_loss=whole_games)
    if clip:
        env = gym.wrappers.ClipReward(env, -1.0, 1.0)
    return gym.wrappers.FrameStackObservation(env, a.frame_stack)

