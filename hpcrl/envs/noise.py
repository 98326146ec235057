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
- dm_control chooses its OpenGL backend once, when it is imported, from ``MUJOCO_GL``; with
  none chosen it takes GLFW whenever the ``glfw`` module loads, display or not, warns ``X11:
  The DISPLAY environment variable is missing``, and fails at its first frame (a video).
  :func:`headless_gl` chooses for it on a node without a display (EGL, else OSMesa, where the
  library is there) before it is imported, and :func:`no_display_probe_warning` keeps the
  warning off where neither is.
"""
from __future__ import annotations

import ctypes.util
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


def _has_display(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether the process has a display to render on (X11 or Wayland)."""
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def headless_gl(environ: dict[str, str] | None = None) -> None:
    """On a node without a display, ``MUJOCO_GL`` set to a backend that renders off-screen
    and whose library is installed (EGL, else OSMesa), unless the user chose one; left alone
    where neither library is found (what needs no frames still runs)."""
    env = os.environ if environ is None else environ
    if _has_display(env) or env.get("MUJOCO_GL"):
        return

    backend = next((name for name, lib in (("egl", "EGL"), ("osmesa", "OSMesa"))
                    if ctypes.util.find_library(lib)), None)
    if backend is not None:
        env["MUJOCO_GL"] = backend


def headless_rendering(environ: dict[str, str] | None = None) -> None:
    """Off-screen rendering on a node without a display (MuJoCo through EGL, SDL through
    its dummy driver), unless the user chose otherwise."""
    env = os.environ if environ is None else environ
    if _has_display(env):
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
