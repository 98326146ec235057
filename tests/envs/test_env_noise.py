"""What env libraries print that is not the user's to act on stays off the console, met the
way a user meets it: a MuJoCo run and a video of a pygame-rendered env, as real processes on
a node without a display."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcrl.envs import noise as env_noise

HPCRL = str(Path(sys.executable).with_name("hpcrl"))


def _headless_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER",
                        "MUJOCO_GL")}
    return {**env, "OMP_NUM_THREADS": "1"}


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([HPCRL, *args], cwd=cwd, env=_headless_env(), capture_output=True,
                          text=True, timeout=240)


@pytest.mark.timeout(300)
def test_a_mujoco_run_prints_no_warning_about_gymnasiums_model_files(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    done = _run("train", "--set", "env.id=HalfCheetah-v5",
                "--set", "train.total_env_steps=1024", "--set", "train.eval_episodes=1",
                "--set", "train.tensorboard=false", "--run-dir", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eval over 1 episodes" in done.stderr
    assert "settotalmass" not in done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


@pytest.mark.timeout(300)
def test_a_video_on_a_node_without_a_display_prints_no_sdl_error(tmp_path: Path) -> None:
    pytest.importorskip("imageio")
    pytest.importorskip("pygame")
    trained = _run("train", "--set", "env.id=CliffWalking-v1", "--set",
                   "train.total_env_steps=256", "--set", "train.eval_episodes=0", "--set",
                   "train.tensorboard=false", "--run-dir", "run", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-2000:]
    done = _run("eval", "run", "--episodes", "1", "--max-episode-steps", "5", "--video",
                "cliff.gif", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cliff.gif: 6 frames" in done.stdout
    assert "XDG_RUNTIME_DIR" not in done.stdout + done.stderr
    assert done.stderr.strip() == ""


def test_other_mujoco_warnings_still_reach_the_user(capsys: pytest.CaptureFixture) -> None:
    env_noise._mujoco_warning("compiler attribute 'settotalmass' is deprecated and will go")
    env_noise._mujoco_warning("Nan, Inf or huge value in QACC at DOF 0")
    err = capsys.readouterr().err
    assert err == "MuJoCo warning: Nan, Inf or huge value in QACC at DOF 0\n"


def test_a_display_or_a_users_choice_is_left_alone() -> None:
    with_display = {"DISPLAY": ":0"}
    env_noise.headless_rendering(with_display)
    assert with_display == {"DISPLAY": ":0"}
    chosen = {"MUJOCO_GL": "osmesa"}
    env_noise.headless_rendering(chosen)
    assert chosen == {"MUJOCO_GL": "osmesa", "SDL_VIDEODRIVER": "dummy"}
