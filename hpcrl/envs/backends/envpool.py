"""EnvPool as a collector's vector env: its C++ thread pool steps the envs.

``env.backend`` picks who steps a collector's envs: ``gymnasium`` (Python envs in one
process, or one subprocess each), ``envpool`` (EnvPool's C++ pool, for the ids it ships), or
``auto`` (the default): EnvPool for Atari games under ``env.preset=atari`` when it is
installed and the chain's settings have an EnvPool equivalent, Gymnasium otherwise. Atari is
where EnvPool pays (the emulator and the preprocessing run in C++, off the Python thread)
and costs nothing: an Atari emulator cannot be captured in a checkpoint under either backend.
Classic-control and MuJoCo envs stay on Gymnasium unless asked for, because Gymnasium's can be
checkpointed exactly and EnvPool's cannot (a resumed run restarts their episodes).

:class:`EnvPoolVectorEnv` gives the pool the vector-env interface collectors use, with the
same-step autoreset they expect: EnvPool resets an env on the step *after* its episode ended
(ignoring that step's action), so after a step that ended episodes the adapter at once
steps just those envs once more, which is EnvPool's reset, and returns the new episodes'
first observations with the last ones in ``info["final_obs"]``, as Gymnasium's
``AutoresetMode.SAME_STEP`` does. For Atari it also reports whole games as the Gymnasium
chain does: ``final_info["episode"]`` with the unclipped score and length of a finished game,
and ``final_info["life_lost"]`` for an episode that ended a life but not the game.

Where the two emulations agree they give the same frames: with one no-op start, no sticky
actions and no FIRE reset, a Pong game under random actions is pixel for pixel the same for
300 steps (tested). They differ in what they draw at random (EnvPool's no-op starts and
sticky actions come from its own generators, seeded per env from the same seeds), in the
FIRE reset (EnvPool presses FIRE, the Gymnasium chain FIRE then UP), and EnvPool 1.2 cannot
run without no-op starts (``env.atari.noop_max=0`` is refused for it, and ``auto`` keeps
Gymnasium then).
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.atari_preprocessing import LIFE_LOST
from hpcrl.envs.backends.backend import BACKENDS, Backend, vector_backend
from hpcrl.envs.make import is_atari
from hpcrl.envs.restarts import (
    CUT,
    IN_PLACE,
    RESTARTED,
    EnvRestartsExhausted,
    describe_error,
    fresh_seed,
)
from hpcrl.envs.suites.suite_ids import register_suite
from hpcrl.sections.schema import EnvConfig

ENVPOOL = "envpool"  # the backend's name, as env.backend writes it
ENVPOOL_INSTALL = "pip install 'hpcrl[envpool]' (or pip install envpool)"
ATARI_SUFFIXES = ("NoFrameskip", "Deterministic")


def _envpool() -> Any:
    import envpool

    return envpool


def installed() -> bool:
    """Whether the envpool package can be imported here."""
    try:
        _envpool()
    except ImportError:
        return False
    return True


def _atari_task(env_id: str) -> str:
    """EnvPool's id of an ALE id: 'ALE/Pong-v5' and 'PongNoFrameskip-v4' are 'Pong-v5'."""
    name = env_id.split("/")[-1].split("-")[0]
    for suffix in ATARI_SUFFIXES:
        name = name.removesuffix(suffix)
    return f"{name}-v5"


def _atari_options(config: EnvConfig) -> dict[str, Any]:
    """EnvPool's keyword arguments for the Atari chain of ``config.atari``, with the id's own
    sticky-action probability and frame limit."""
    a = config.atari
    spec = gym.spec(config.id)
    sticky = (a.repeat_action_probability if a.repeat_action_probability is not None
              else float(spec.kwargs.get("repeat_action_probability", 0.0)))
    frames = int(spec.kwargs.get("max_num_frames_per_episode", 108_000))
    return {"stack_num": a.frame_stack, "frame_skip": a.frame_skip, "noop_max": a.noop_max,
            "episodic_life": a.terminal_on_life_loss, "reward_clip": a.clip_reward,
            "use_fire_reset": a.fire_reset, "img_height": a.screen_size,
            "img_width": a.screen_size, "gray_scale": True,
            "repeat_action_probability": sticky,
            "max_episode_steps": max(frames // max(a.frame_skip, 1), 1)}


def envpool_problem(config: EnvConfig) -> str | None:
    """Why EnvPool cannot step ``config``'s envs (a sentence naming the key and the fix), or
    None when it can."""
    if not installed():
        return f"EnvPool is not installed; fix: {ENVPOOL_INSTALL}"
    if config.wrappers:
        return ("env.wrappers are Gymnasium wrappers, which cannot wrap EnvPool's C++ envs; "
                "drop env.wrappers or use env.backend=gymnasium")
    if config.vectorization == "async":
        return ("env.vectorization=async runs Gymnasium envs in subprocesses, and EnvPool "
                "steps its envs in its own threads (env.envpool_threads); drop "
                "env.vectorization=async or use env.backend=gymnasium")
    if config.kwargs:
        return ("env.kwargs are the Gymnasium env's constructor arguments, which EnvPool's "
                "envs do not take; drop env.kwargs or use env.backend=gymnasium")
    known = set(_envpool().list_all_envs())
    register_suite(config.id)
    if config.preset == "atari" and is_atari(config.id):
        if not config.atari.grayscale:
            return ("env.atari.grayscale=false: EnvPool stacks RGB frames as 3 x "
                    "env.atari.frame_stack channels, where hpcrl's chain keeps "
                    "[frame_stack, H, W, 3]; use env.backend=gymnasium for RGB frames")
        if config.atari.noop_max < 1:
            return ("env.atari.noop_max=0: EnvPool 1.2's Atari envs crash without no-op "
                    "starts; set env.atari.noop_max >= 1 (1: exactly one no-op after each "
                    "reset, as in the Gymnasium chain) or use env.backend=gymnasium")
        task = _atari_task(config.id)
        if task not in known:
            return f"EnvPool does not ship the game of env.id='{config.id}' ({task})"
        return None
    if is_atari(config.id):
        return ("EnvPool's Atari envs come preprocessed (frame skip, resize, stack), so they "
                "serve env.preset=atari only; set env.preset=atari or env.backend=gymnasium")
    if config.id not in known:
        return (f"EnvPool does not ship env.id='{config.id}' (it ships Atari games, MuJoCo "
                f"and classic-control tasks, among {len(known)} ids); use "
                f"env.backend=gymnasium")
    return None


def auto_picks_envpool(config: EnvConfig) -> bool:
    """Whether ``env.backend=auto`` steps the envs of ``config`` on EnvPool: Atari games
    under the atari chain, where EnvPool is installed and fits the config (EnvPool pays for
    Atari, and costs no checkpoint exactness there)."""
    return config.preset == "atari" and installed() and envpool_problem(config) is None


def uses_envpool(config: EnvConfig) -> bool:
    """Whether a collector's envs of ``config`` run on EnvPool; raises
    :class:`~hpcrl.envs.backends.backend.BackendUnavailable` for ``env.backend=envpool``
    where it cannot."""
    return vector_backend(config).name == ENVPOOL


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs of ``config`` on one EnvPool, with same-step autoreset.

    The pool is made at the first ``reset(seed=[...])``, with those seeds for its envs
    (collectors reset once, with the job's per-env seeds); its spaces are known before."""

    def __init__(self, config: EnvConfig, num_envs: int, max_restarts: int = 0) -> None:
        self.config, self.num_envs = config, num_envs
        # a failing pool is made again whole, at most this many times in a row
        self.max_restarts, self.restarts = max_restarts, 0  # restarts in a row
        self.pools_made_again = 0  # in all: the count behind each new pool's fresh seeds
        self.seeds = list(range(num_envs))  # each env's first seed: its fresh seeds' base
        self._failure: BaseException | None = None  # of the last send
        self._last: np.ndarray | None = None  # the observations last returned
        self.atari = config.preset == "atari"
        self.task = _atari_task(config.id) if self.atari else config.id
        self.options = _atari_options(config) if self.atari else {}
        threads = config.envpool_threads or min(num_envs, len(os.sched_getaffinity(0)))
        self.options["num_threads"] = max(1, min(threads, num_envs))
        with warnings.catch_warnings():  # EnvPool's float64 Box bounds: noise, not news
            warnings.filterwarnings("ignore", message=".*precision lowered by casting")
            spec = _envpool().make_spec(self.task, **self.options)
            self.single_observation_space = spec.gymnasium_observation_space
            self.single_action_space = spec.gymnasium_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.pool: Any = None
        self.game_return = np.zeros(num_envs, np.float64)
        self.game_length = np.zeros(num_envs, np.int64)

    def reset(self, *, seed: Any = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Make a fresh pool with env ``i`` seeded ``seed[i]`` (or ``seed + i``, 0 when None) and
        return its first observations; the games' returns and lengths start at 0."""
        seeds = (list(seed) if isinstance(seed, (list, tuple, np.ndarray))
                 else [int(seed or 0) + i for i in range(self.num_envs)])
        self.seeds = [int(s) for s in seeds]
        return self._make(self.seeds), {}

    def _make(self, seeds: list[int]) -> np.ndarray:
        """A new pool whose env ``i`` is seeded ``seeds[i]``; its first observations."""
        if self.pool is not None:
            try:
                self.pool.close()
            except Exception:
                pass  # a pool that failed may not close cleanly
        self.pool = _envpool().make(self.task, env_type="gymnasium", num_envs=self.num_envs,
                                    env_seed=seeds, **self.options)
        obs, _ = self.pool.reset()
        self.game_return[:] = 0.0
        self.game_length[:] = 0
        self._last = obs.copy()
        return obs

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                         dict[str, Any]]:
        """Step the pool (:meth:`step_async`, then :meth:`step_wait`)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Hand the pool every env's action; its threads step them while this one goes on
        (``scheme.env_groups``: another group's actions are computed meanwhile)."""
        self._failure = None
        try:
            self.pool.send(np.asarray(actions))
        except Exception as err:
            if self.max_restarts <= 0:
                raise
            self._failure = err  # the pool is made again in step_wait

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                 dict[str, Any]]:
        """What the step :meth:`step_async` started returned, in env order; envs whose
        episode ended are stepped once more at once (EnvPool's reset), so the observations
        are the new episodes' first ones, the last ones in ``info['final_obs']`` (and, for
        Atari, the finished games in ``final_info``)."""
        try:
            if self._failure is not None:
                raise self._failure
            obs, rewards, terminated, truncated, info = self.pool.recv()
        except Exception as err:
            if self.max_restarts <= 0:
                raise
            return self._restart(err)
        self.restarts = 0
        order = np.asarray(info["env_id"])
        if (order != np.arange(self.num_envs)).any():  # a whole batch, in any order
            back = np.argsort(order)
            obs, rewards = obs[back], rewards[back]
            terminated, truncated = terminated[back], truncated[back]
            info = {k: (np.asarray(v)[back] if np.ndim(v) else v) for k, v in info.items()}
        done = terminated | truncated
        out: dict[str, Any] = {}
        if self.atari:
            self.game_return += info["reward"]
            self.game_length += 1
        if done.any():
            ids = np.flatnonzero(done)
            out["final_obs"] = obs.copy()
            out["_final_obs"] = done
            if self.atari:
                out["final_info"] = self._games(done, truncated, info)
            # EnvPool resets an env on its next step: take that step now, for these envs
            first, *_ = self.pool.step(self._noop(len(ids)), ids)
            obs = obs.copy()
            obs[ids] = first
        self._last = obs.copy()
        return obs, rewards.astype(np.float64), terminated, truncated, out

    def _restart(self, err: BaseException) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                    np.ndarray, dict[str, Any]]:
        """The pool failed: every env of it is made again (EnvPool cannot make one of its
        envs again alone) with a fresh seed, and every episode is cut (reward 0, truncated,
        the last observations as the final ones; :mod:`hpcrl.envs.restarts`' marks)."""
        why = f"{describe_error(err)} in EnvPool's step (its whole pool made again)"
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise EnvRestartsExhausted(
                f"EnvPool of {self.num_envs} envs failed {self.restarts} times in a row, "
                f"made again each time (env.max_restarts={self.max_restarts}); its last "
                f"error: {why}") from err
        last = self._last
        self.pools_made_again += 1
        first = self._make([fresh_seed(s, IN_PLACE, self.pools_made_again)
                            for s in self.seeds])
        everyone = np.ones(self.num_envs, bool)
        words = np.array([why] * self.num_envs, object)
        info = {"final_obs": last if last is not None else first.copy(),
                "_final_obs": everyone,
                "final_info": {CUT: words, "_" + CUT: everyone},
                RESTARTED: words, "_" + RESTARTED: everyone}
        zeros = np.zeros(self.num_envs)
        return first, zeros, ~everyone, everyone.copy(), info

    def _games(self, done: np.ndarray, truncated: np.ndarray, info: dict[str, Any]
               ) -> dict[str, Any]:
        """Whole-game statistics of the episodes that ended (Gymnasium's convention): with
        episodic life an episode ends the game when the game is over (EnvPool's
        ``info["terminated"]``) or cut by the frame limit, else it ended a life."""
        game_over = done.copy()
        if self.options.get("episodic_life"):
            game_over &= truncated | (np.asarray(info["terminated"]) > 0)
        final = {"episode": {"r": self.game_return.copy(), "l": self.game_length.copy()},
                 "_episode": game_over, "_" + LIFE_LOST: done & ~game_over}
        self.game_return[game_over] = 0.0
        self.game_length[game_over] = 0
        return final

    def _noop(self, count: int) -> np.ndarray:
        dtype = np.int32 if isinstance(self.single_action_space, gym.spaces.Discrete) else None
        shape = (count,) + tuple(self.single_action_space.shape or ())
        return np.zeros(shape, dtype or self.single_action_space.dtype)

    # -- what collectors ask of any vector env ------------------------------------------
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Only ``hpcrl_state``: every env reports its state as missing (EnvPool's cannot be
        captured); any other name raises AttributeError."""
        if name == "hpcrl_state":  # EnvPool's C++ envs cannot be captured
            return tuple({"missing": ["envpool"]} for _ in range(self.num_envs))
        raise AttributeError(f"EnvPool envs have no method {name!r} to call")

    def set_attr(self, name: str, values: Any) -> None:
        """Accept ``hpcrl_state`` and ignore it (there is nothing to restore); any other name
        raises AttributeError."""
        if name != "hpcrl_state":
            raise AttributeError(f"EnvPool envs have no attribute {name!r} to set")

    def close(self, **kwargs: Any) -> None:
        """Close the pool, if one was made."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def _envpool_vector_env(config: EnvConfig, num_envs: int,
                        global_indices: Sequence[int] | None) -> gym.vector.VectorEnv:
    # a collector's envs (global_indices given) come back when they fail; evaluation's not
    restarts = config.max_restarts if global_indices is not None else 0
    return EnvPoolVectorEnv(config, num_envs, restarts)


ENVPOOL_BACKEND = BACKENDS.add(Backend(name=ENVPOOL, make=_envpool_vector_env,
                                       problem=envpool_problem, auto=auto_picks_envpool))
