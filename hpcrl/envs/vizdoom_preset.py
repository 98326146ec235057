"""ViZDoom's 3D first-person scenarios as hpcrl envs: ``env.preset: vizdoom``.

The chain follows Sample Factory's ViZDoom setup, the field's reference results on these
scenarios: the game renders at ``env.vizdoom.resolution`` (160x120) and repeats each action
for ``frame_skip`` frames inside the engine (4: rewards summed, the skipped frames never
rendered), the screen is resized to ``width`` x ``height`` (128x72) RGB with area
interpolation and kept uint8, channels last; where the scenario reports game variables
(health, ammo) they travel beside it as the ``gamevariables`` key of a ``Dict`` observation,
so the image key goes through the image encoder and the variables through their values.
``frame_stack`` > 1 stacks the last screens on the channel axis (the seed's agent stacked 4;
Sample Factory relies on its recurrent core instead).

The ids are ViZDoom's own Gymnasium ids (``VizdoomBasic-v1``, ``VizdoomHealthGathering-v1``,
...), registered by importing ``vizdoom.gymnasium_wrapper`` (hpcrl does that for an id that
starts with ``Vizdoom``). The game itself cannot be captured in a checkpoint: a resumed run
resets its envs, as an Atari run does.

ViZDoom's engine (a process of its own, started at the game's first reset) creates
``./_vizdoom/`` and ``./_vizdoom.ini`` in the working directory it starts in, and fails, or
crashes, when another engine made the folder a moment before: collector ranks that start
their games together in one directory (every MPI job's ranks do) were seen to lose a rank to
it ("Failed to create ./_vizdoom/ directory: File exists", exit status 11). Every ViZDoom env
of hpcrl (:class:`EngineDirectory`) therefore starts its engine in a directory of its own
process's, under the system's temporary directory, which also keeps those files out of the
user's directory.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.child_signals import stop_signals_held
from hpcrl.envs.suites.suite import install_line
from hpcrl.sections.schema import EnvConfig

VIZDOOM_PACKAGES = ("vizdoom", "opencv-python-headless")  # what the vizdoom extra installs
VIZDOOM_INSTALL = install_line("vizdoom", VIZDOOM_PACKAGES)
RESOLUTIONS = ("160x120", "200x150", "256x144", "320x240", "640x480")
SCREEN, VARIABLES = "screen", "gamevariables"


VIZDOOM_IDS = re.compile(r"^Vizdoom")  # ViZDoom's Gymnasium ids: VizdoomBasic-v1, ...


def is_vizdoom(env_id: str) -> bool:
    """Whether ``env_id`` is one of ViZDoom's Gymnasium ids."""
    return bool(VIZDOOM_IDS.search(env_id))


_ENGINE_DIRS: dict[int, Path] = {}  # process id -> its engines' working directory


def engine_dir() -> Path:
    """This process's working directory for ViZDoom's engines (made on first use, removed at
    exit); a forked child makes its own, since its engines must not share its parent's."""
    pid = os.getpid()
    if pid not in _ENGINE_DIRS:
        _ENGINE_DIRS[pid] = Path(tempfile.mkdtemp(prefix=f"hpcrl-vizdoom-{pid}-"))
        atexit.register(shutil.rmtree, _ENGINE_DIRS[pid], True)
    return _ENGINE_DIRS[pid]


@contextmanager
def in_engine_dir() -> Iterator[Path]:
    """Run the body in :func:`engine_dir` (the process's working directory is restored
    after, also on an error)."""
    here = os.getcwd()
    os.chdir(engine_dir())
    try:
        yield engine_dir()
    finally:
        os.chdir(here)


class EngineDirectory(gym.Wrapper):
    """Starts the game's engine (at its first reset) in :func:`engine_dir` instead of the
    working directory (see the module docstring: engines that start together in one
    directory race for its ``_vizdoom`` folder), deaf to the scheduler's stop signals (its
    rank checkpoints on them: :mod:`hpcrl.envs.child_signals`)."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the game; the first reset starts its engine in this process's directory."""
        game = getattr(self.env.unwrapped, "game", None)
        if game is not None and game.is_running():
            return self.env.reset(**kwargs)
        with in_engine_dir(), stop_signals_held():  # the engine is a process of its own
            return self.env.reset(**kwargs)


class DoomObservation(gym.ObservationWrapper):
    """The screen resized to ``width`` x ``height`` (uint8, channels last), the last
    ``stack`` of them on the channel axis, and the game variables beside it when the
    scenario has any (then a ``Dict`` observation, else the screen alone)."""

    def __init__(self, env: gym.Env, width: int, height: int, stack: int = 1,
                 variables: bool = True) -> None:
        super().__init__(env)
        space = env.observation_space
        # ViZDoom's Gymnasium env observes a Dict: the screen, the game variables, ...
        assert isinstance(space, gym.spaces.Dict), space
        screen_space = space[SCREEN]
        assert isinstance(screen_space, gym.spaces.Box), screen_space  # the screen's pixels
        channels = screen_space.shape[-1]
        self.size, self.stack = (int(width), int(height)), int(stack)
        self.frames: deque[np.ndarray] = deque(maxlen=self.stack)
        screen = gym.spaces.Box(0, 255, (int(height), int(width), channels * self.stack),
                                np.uint8)
        self.variables = variables and VARIABLES in space.spaces
        if self.variables:
            self.observation_space = gym.spaces.Dict({SCREEN: screen,
                                                      VARIABLES: space[VARIABLES]})
        else:
            self.observation_space = screen

    def _resized(self, screen: np.ndarray) -> np.ndarray:
        import cv2

        if screen.shape[1::-1] == self.size:
            return screen
        return cv2.resize(screen, self.size, interpolation=cv2.INTER_AREA)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the game and forget the stacked frames (the first one is repeated)."""
        self.frames.clear()
        return super().reset(**kwargs)

    def observation(self, obs: dict[str, np.ndarray]) -> Any:
        """The resized screen stacked with the previous ``stack - 1``, with the game variables
        (float32) beside it in a dict when the scenario has them."""
        frame = self._resized(obs[SCREEN])
        while len(self.frames) < self.stack - 1:  # a fresh episode: the first frame repeated
            self.frames.append(frame)
        self.frames.append(frame)
        screen = frame if self.stack == 1 else np.concatenate(list(self.frames), axis=-1)
        if not self.variables:
            return screen
        return {SCREEN: screen, VARIABLES: np.asarray(obs[VARIABLES], np.float32)}


def vizdoom_env(config: EnvConfig) -> gym.Env:
    """``config.id`` with the chain of ``config.vizdoom`` (see the module docstring)."""
    v = config.vizdoom
    width, height = v.resolution.split("x")
    env = gym.make(config.id, frame_skip=v.frame_skip,
                   screen_resolution=f"RES_{width}X{height}", **config.kwargs)
    return DoomObservation(EngineDirectory(env), v.width, v.height, v.frame_stack,
                           v.game_variables)


def vizdoom_problem(config: EnvConfig) -> str | None:
    """Why ``env.preset=vizdoom`` cannot be applied to ``config.id`` (with the fix), or None."""
    if not is_vizdoom(config.id):
        return (f"config key 'env.preset': 'vizdoom' preprocesses ViZDoom scenarios, but "
                f"env.id='{config.id}' is not one; use an id such as 'VizdoomBasic-v1' or "
                f"'VizdoomHealthGathering-v1', or set env.preset=none")
    v = config.vizdoom
    if v.resolution not in RESOLUTIONS:
        return (f"config key 'env.vizdoom.resolution' ({v.resolution}) is not a ViZDoom "
                f"screen resolution; use one of {', '.join(RESOLUTIONS)}")
    for key in ("frame_skip", "width", "height", "frame_stack"):
        if getattr(v, key) < 1:
            return f"config key 'env.vizdoom.{key}' must be >= 1, got {getattr(v, key)}"
    clash = sorted({"frame_skip", "screen_resolution"} & set(config.kwargs))
    if clash:
        return (f"config key 'env.kwargs.{clash[0]}': env.preset=vizdoom sets it from "
                f"env.vizdoom.*; remove env.kwargs.{clash[0]}")
    try:
        import cv2  # noqa: F401  (the screen is resized with it)
    except ImportError:
        return (f"config key 'env.preset': the vizdoom chain resizes frames with OpenCV; "
                f"fix: {VIZDOOM_INSTALL}")
    return None
