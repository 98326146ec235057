"""Looking at runs: the runs table against the rows it summarises, learning-curve plots,
and videos of the deterministic episodes."""
from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner
from PIL import Image

from hpcrl.cli import main

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
        "algo.ppo.num_epochs=2",
        "train.total_env_steps=1024", "train.eval_episodes=2", "train.tensorboard=false"]


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def train(run, *sets: str) -> None:
    args = ["train", "--run-dir", run]
    for item in [*TINY, *sets]:
        args += ["--set", item]
    out = invoke(*args)
    assert out.exit_code == 0, out.output


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two seeds of lr 1e-3, one of lr 3e-4; a copy cut short by a signal, one that died."""
    root = tmp_path_factory.mktemp("sweep")
    train(root / "lr1e-3-s0", "seed=0", "algo.lr=1e-3")
    train(root / "lr1e-3-s1", "seed=1", "algo.lr=1e-3")
    train(root / "lr3e-4-s0", "seed=0", "algo.lr=3e-4")
    return root


def test_the_runs_table_says_what_each_run_did(sweep):
    out = invoke("runs", sweep, "--json")
    assert out.exit_code == 0, out.output
    records = json.loads(out.output)
    assert [r["run_dir"] for r in records] == [str(sweep / n) for n in
                                               ("lr1e-3-s0", "lr1e-3-s1", "lr3e-4-s0")]
    for record in records:
        run = sweep / os.path.basename(record["run_dir"])
        rows = (run / "progress.csv").read_text().strip().splitlines()
        header, last = rows[0].split(","), rows[-1].split(",")
        assert record["env_steps"] == int(last[header.index("env_steps")])
        assert record["last_return"] == pytest.approx(
            float(last[header.index("episode_return_mean")]))
        assert record["eval_return"] == json.loads((run / "eval.json").read_text())[
            "mean_return"]
        assert record["state"] == "finished" and "algo.lr" in record
    text = invoke("runs", sweep).output
    assert "algo.lr=0.001  2" in text  # the two seeds of one config, with mean +- std


def test_states_of_runs_cut_short(sweep, tmp_path):
    import shutil

    for name in ("stopped", "dead", "live", "broken"):
        shutil.copytree(sweep / "lr3e-4-s0", tmp_path / name)
        (tmp_path / name / "eval.json").unlink()
        rows = (tmp_path / name / "progress.csv").read_text().splitlines()
        (tmp_path / name / "progress.csv").write_text("\n".join(rows[:10]) + "\n")
    (tmp_path / "stopped" / "stopped").write_text("SIGUSR1\n")
    (tmp_path / "broken" / "stopped").write_text("env failed: env 3 (global index) ...\n")
    old = time.time() - 3600
    os.utime(tmp_path / "dead" / "progress.csv", (old, old))
    records = json.loads(invoke("runs", tmp_path, "--json").output)
    assert {os.path.basename(r["run_dir"]): r["state"] for r in records} == {
        "dead": "failed", "live": "running", "stopped": "preempted", "broken": "env failed"}
    out = invoke("runs", "--csv", tmp_path)
    assert out.output.splitlines()[0].startswith("run_dir,group,seed,")


def test_a_plot_draws_one_curve_per_config(sweep, tmp_path):
    out = invoke("plot", sweep, "-o", tmp_path / "curves.png")
    assert out.exit_code == 0 and "2 curves" in out.output, out.output
    with Image.open(tmp_path / "curves.png") as image:
        assert image.size[0] > 400
    out = invoke("plot", sweep / "lr1e-3-s0", "--scheme", "--x", "wall_time_s",
                 "-o", tmp_path / "scheme.png")
    assert out.exit_code == 0 and "1 curve" in out.output, out.output
    assert invoke("runs", tmp_path).exit_code != 0  # no run there: said so


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_a_video_holds_every_frame_of_the_episodes(sweep, tmp_path, suffix):
    video = tmp_path / f"play{suffix}"
    out = invoke("eval", sweep / "lr1e-3-s0", "-n", 2, "--video", video, "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    # CartPole pays 1 a step: a frame after each reset and after each step
    expected = int(sum(result["returns"])) + 2
    assert result["frames"] == expected
    if suffix == ".gif":  # Pillow merges repeated frames, adding up their durations
        with Image.open(video) as gif:
            durations = []
            for i in range(gif.n_frames):
                gif.seek(i)
                durations.append(gif.info["duration"])
            assert gif.size == (600, 400)
        assert sum(durations) == pytest.approx(expected * 1000 / 50, abs=gif.n_frames)
    else:
        import imageio.v3 as iio
        assert sum(1 for _ in iio.imiter(video)) == expected
    plain = json.loads(invoke("eval", sweep / "lr1e-3-s0", "-n", 2, "--json").output)
    assert plain["returns"] == result["returns"]  # the same episodes as hpcrl eval


def test_a_video_of_a_bad_name_is_one_line(sweep, tmp_path):
    out = CliRunner().invoke(main, ["eval", str(sweep / "lr1e-3-s0"), "--video",
                                    str(tmp_path / "x.avi")])
    assert out.exit_code == 1 and "must end in .mp4 or .gif" in out.output


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sets,shape", [
    (["env.id=InvertedPendulum-v5"], (480, 480)),
    (["env.id=ALE/Breakout-v5", "env.preset=atari", "actor.encoder=nature_cnn",
      "actor.hidden_sizes=[]", "actor.features=64"], (210, 160)),
], ids=["mujoco", "atari"])
def test_mujoco_and_atari_record_their_screens(tmp_path, sets, shape):
    run = tmp_path / "run"
    train(run, *sets, "train.eval_episodes=0")
    video = tmp_path / "play.mp4"
    out = invoke("eval", run, "-n", 1, "--video", video, "--json")
    assert out.exit_code == 0, out.output
    frames = json.loads(out.output)["frames"]
    import imageio.v3 as iio
    read = list(iio.imiter(video))
    assert len(read) == frames > 10 and read[0].shape == shape + (3,)


def test_the_readme_commands_on_the_default_run_directory(tmp_path, monkeypatch):
    """`hpcrl train` with no --run-dir, then `hpcrl runs runs/` and `hpcrl plot runs/ -o
    curves.png` exactly as the README has them."""
    monkeypatch.chdir(tmp_path)
    args = ["train"]
    for item in TINY:
        args += ["--set", item]
    assert invoke(*args).exit_code == 0
    (run,) = (tmp_path / "runs").iterdir()
    table = invoke("runs", "runs/")
    assert table.exit_code == 0 and f"runs/{run.name}" in table.output
    assert "finished" in table.output
    plot = invoke("plot", "runs/", "-o", "curves.png")
    assert plot.exit_code == 0 and (tmp_path / "curves.png").stat().st_size > 0
