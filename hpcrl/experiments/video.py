"""Videos of a trained policy: ``hpcrl eval RUN_DIR --video out.mp4`` (or ``.gif``).

The deterministic evaluation episodes play one after the other in envs made with
``render_mode="rgb_array"`` (the same episodes, seeds and returns as ``hpcrl eval``), and
each rendered frame is appended to the file as it comes, so a long Atari game never sits in
memory. MP4 goes through imageio's ffmpeg plugin, GIF through Pillow (``pip install
"hpcrl[video]"``). Atari renders the full-colour screen, not the 84x84 frames the agent sees.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from hpcrl.envs.noise import headless_rendering
from hpcrl.errors import ExplainedError
from hpcrl.learning.evaluation import evaluate
from hpcrl.sections.schema import EnvConfig

FORMATS = (".mp4", ".gif")
VIDEO_INSTALL = 'pip install "hpcrl[video]"  (imageio and imageio-ffmpeg)'


class VideoError(ExplainedError):
    """A video that cannot be written (format, missing writer, an env that cannot render)."""


def _writer(path: Path, fps: float) -> Any:
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise VideoError(f"recording videos needs imageio: {VIDEO_INSTALL}") from None
    if path.suffix == ".gif":
        return imageio.get_writer(path, mode="I", duration=1000.0 / fps, loop=0)
    try:
        import imageio_ffmpeg  # noqa: F401  (the mp4 writer)
    except ImportError:
        raise VideoError(f"writing {path.suffix} needs ffmpeg through imageio-ffmpeg: "
                         f"{VIDEO_INSTALL}; or ask for a .gif") from None
    return imageio.get_writer(path, fps=fps, macro_block_size=1)


def record(actor: torch.nn.Module, env: EnvConfig, episodes: int, path: str | Path,
           seed: int, max_episode_steps: int = 0, console: IO[str] | None = None,
           on_step: Any | None = None) -> dict[str, Any]:
    """Play ``episodes`` deterministic episodes of the envs of ``env`` into the video
    ``path``; returns the evaluation figures (as :func:`hpcrl.learning.evaluation.evaluate`, from
    ``seed`` and cut at ``max_episode_steps``, which says how far a long one got on
    ``console`` and passes every step to ``on_step``) with ``frames`` and ``video``."""
    headless_rendering()  # MuJoCo and SDL render off-screen on a node without a display
    path = Path(path)
    if path.suffix not in FORMATS:
        raise VideoError(f"--video '{path}': the file must end in {' or '.join(FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    writer, frames = None, 0

    def on_frame(env: Any) -> None:
        nonlocal writer, frames
        try:
            frame = env.render()
        except Exception as err:  # an env's renderer may fail in its own ways
            raise VideoError(f"env '{env.id}' could not render: {type(err).__name__}: "
                             f"{err} (MuJoCo on a node without a display: set MUJOCO_GL=egl "
                             f"or osmesa)") from None
        if frame is None:
            raise VideoError(f"env '{env.id}' rendered no frame with "
                             f"render_mode='rgb_array'; it cannot be recorded")
        if writer is None:
            writer = _writer(path, float(env.metadata.get("render_fps") or 30))
        writer.append_data(np.asarray(frame, dtype=np.uint8))
        frames += 1

    try:
        result = evaluate(actor, env, episodes, seed, max_episode_steps, on_frame=on_frame,
                          console=console, on_step=on_step)
    finally:
        if writer is not None:
            writer.close()
    return {**result, "frames": frames, "video": str(path)}
