"""Messages of env libraries that are not the user's to act on, kept off the console.

- MuJoCo 3.x warns, on every model compile, that Gymnasium's own model files use the
  deprecated ``settotalmass`` compiler attribute (HalfCheetah, Ant...): one warning per env
  made, 19 in a short run, and a ``MUJOCO_LOG.TXT`` in the working directory. Nothing in the
  user's config can change it. That warning is dropped; every other MuJoCo warning still
  reaches stderr, one line each.
- SDL (pygame's renderer: Blackjack, CliffWalking, the Box2D envs) probes for a display
  when an env renders, and on a headless node prints ``error: XDG_RUNTIME_DIR is invalid``
  though ``rgb_array`` frames need no display at all. Rendering without a display uses its
  dummy video driver (and MuJoCo EGL); a user who set either variable keeps theirs.
- dm_control, when imported on a node without a display and no ``MUJOCO_GL`` chosen, tries
  GLFW first and warns ``X11: The DISPLAY environment variable is missing`` before it falls
  back to EGL or OSMesa by itself; :func:`no_display_probe_warning` keeps that warning off.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

NOT_THE_USERS = ("compiler attribute 'settotalmass' is deprecated",)
_mujoco_filtered = False


def _mujoco_warning(message: str) -> None:
    """MuJoCo's warning callback: drop :data:`NOT_THE_USERS`, say the rest on stderr."""
    if not any(known in message for known in NOT_THE_USERS):
        print(f"MuJoCo warning: {message}", file=sys.stderr, flush=True)


def quiet_mujoco() -> None:
    """Install the warning filter in this process (once), before a MuJoCo env is made."""
    global _mujoco_filtered
    if _mujoco_filtered:
        return
    try:
        import mujoco
    except ImportError:  # making the env will say what is missing
        return
    mujoco.set_mju_user_warning(_mujoco_warning)
    _mujoco_filtered = True


def headless_rendering(environ: dict[str, str] | None = None) -> None:
    """Off-screen rendering on a node without a display (MuJoCo through EGL, SDL through
    its dummy driver), unless the user chose otherwise."""
    env = os.environ if environ is None else environ
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("SDL_VIDEODRIVER", "dummy")


@contextmanager
def no_display_probe_warning() -> Iterator[None]:
    """Run the body (an import of dm_control) without GLFW's warning that there is no
    display; every other warning still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DISPLAY environment variable is missing")
        yield
