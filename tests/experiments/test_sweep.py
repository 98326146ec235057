"""``hpcrl sweep`` and ``hpcrl slurm sweep`` without a cluster: expansion, the manifest and
what a restart does, the local runner (points N at a time, a stop and a resume), and the job
array script. The array on a real Slurm is tests/slurm/test_sweep_array.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.experiments.sweep import (
    SweepError,
    expand,
    new_sweep,
    parse_grid,
    parse_seeds,
    split_values,
    start_sweep,
)
from hpcrl.runtime.run_dir import RunDir, is_finished
from hpcrl.slurm.sweep import array_spec

HPCRL = str(Path(sys.executable).with_name("hpcrl"))
TINY = ["train.total_env_steps=1024", "train.eval_episodes=2", "train.tensorboard=false",
        "algo.num_steps=64", "env.num_envs=2", "algo.ppo.minibatch_size=64"]


def sets(items: list[str]) -> list[str]:
    return [a for item in items for a in ("--set", item)]


def test_seeds_and_grid_values_parse_as_written() -> None:
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0-2,10,1") == [0, 1, 2, 10]
    assert split_values("[64,64],[32, 32]") == ["[64,64]", "[32, 32]"]
    assert parse_grid(["algo.lr=3e-4,1e-3", "actor.hidden_sizes=[64,64],[32]"]) == {
        "algo.lr": ["3e-4", "1e-3"], "actor.hidden_sizes": ["[64,64]", "[32]"]}
    for bad, says in (("4-1", "backwards"), ("a", "not a seed")):
        with pytest.raises(SweepError, match=says):
            parse_seeds(bad)
    for bad, says in ((["algo.lr"], "KEY=VALUE"), (["seed=1,2"], "--seeds"),
                      (["algo.lr=1,1"], "repeats"), (["algo.lr=1", "algo.lr=2"], "twice")):
        with pytest.raises(SweepError, match=says):
            parse_grid(bad)


def test_points_are_every_combination_with_every_seed_named_by_their_values() -> None:
    points = expand({"algo.lr": ["3e-4", "1e-3"], "env.num_envs": ["8"]}, [0, 1])
    assert [p.name for p in points] == ["lr=3e-4,num_envs=8,seed=0", "lr=3e-4,num_envs=8,seed=1",
                                        "lr=1e-3,num_envs=8,seed=0", "lr=1e-3,num_envs=8,seed=1"]
    assert points[1].sets == ("algo.lr=3e-4", "env.num_envs=8", "seed=1")
    # two keys ending alike keep their full names; unsafe characters become _
    points = expand({"algo.lr": ["1"], "critic.lr": ["2"], "actor.hidden_sizes": ["[8, 8]"]},
                    [3])
    assert points[0].name == "algo.lr=1,critic.lr=2,hidden_sizes=_8_8_,seed=3"
    assert array_spec([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_a_bad_point_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["sweep", "--grid", "algo.lrr=1e-3", "--run-dir",
                                    str(tmp_path / "s")])
    assert out.exit_code == 1
    assert "point lrr=1e-3,seed=0: unknown config key 'algo.lrr'" in out.output
    assert "did you mean 'algo.lr'" in out.output and not (tmp_path / "s").exists()


@pytest.mark.timeout(300)
def test_the_readme_s_local_sweep_trains_every_point_and_a_second_start_leaves_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's local sweep (seeds and budget cut down), two points at a time: the
    manifest, a run directory per point with its seed and value, `hpcrl runs` and `hpcrl
    plot` over it, then the same command again, which trains nothing."""
    monkeypatch.chdir(tmp_path)
    cmd = [HPCRL, "sweep", "--seeds", "0-1", "--grid", "algo.lr=3e-4,1e-3", "--jobs", "2",
           "--run-dir", "runs/lr", *sets(TINY)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "runs" / "lr"
    manifest = yaml.safe_load((sweep / "sweep.yaml").read_text())
    names = [p["name"] for p in manifest["points"]]
    assert names == ["lr=3e-4,seed=0", "lr=3e-4,seed=1", "lr=1e-3,seed=0", "lr=1e-3,seed=1"]
    assert manifest["config"] is None and not (sweep / "sweep-config.yaml").exists()
    for name in names:
        saved = yaml.safe_load((sweep / name / "config.yaml").read_text())
        assert saved["seed"] == int(name[-1]) and str(saved["algo"]["lr"]) in ("0.0003", "0.001")
        assert saved["train"]["total_env_steps"] == 1024
        assert is_finished(RunDir(sweep / name))
        assert (sweep / "logs" / f"{name}.log").read_text().count("== ") == 1
    assert done.stderr.count("hpcrl sweep: finished") == 4

    table = subprocess.run([HPCRL, "runs", "runs/lr", "--json"], capture_output=True,
                           text=True, timeout=60)
    records = json.loads(table.stdout)
    assert sorted(r["group"] for r in records) == ["algo.lr=0.0003"] * 2 + ["algo.lr=0.001"] * 2
    for r in records:
        evaluation = json.loads((Path(r["run_dir"]) / "eval.json").read_text())
        assert r["eval_return"] == evaluation["mean_return"] and r["state"] == "finished"
    pytest.importorskip("matplotlib")
    plot = subprocess.run([HPCRL, "plot", "runs/lr", "-o", "lr.png"], capture_output=True,
                          text=True, timeout=120)
    assert plot.returncode == 0 and "lr.png: 2 curves" in plot.stdout, plot.stderr

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "4 finished, 0 to train" in again.stderr, again.stderr
    assert manifest["jobs"] == 2  # --resume trains as this sweep was trained: 2 at a time
    resumed = subprocess.run([HPCRL, "sweep", "--resume", "runs/lr"], capture_output=True,
                             text=True, timeout=60)
    assert "4 finished, 0 to train, 2 at a time" in resumed.stderr, resumed.stderr
    other = subprocess.run([*cmd[:3], "0-2", *cmd[4:]], capture_output=True, text=True,
                           timeout=60)
    assert other.returncode == 1 and "holds another sweep" in other.stderr


def test_a_config_file_changed_during_a_sweep_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("algo:\n  lr: 1.0e-3\n")
    start_sweep(new_sweep(tmp_path / "s", str(config), ["seed=1"], ["env.num_envs=8,16"], None))
    assert (tmp_path / "s" / "sweep-config.yaml").read_text() == config.read_text()
    again = start_sweep(new_sweep(tmp_path / "s", str(config), ["seed=1"],
                                  ["env.num_envs=8,16"], None))
    assert [p.name for p in again.points] == ["num_envs=8,seed=1", "num_envs=16,seed=1"]
    config.write_text("algo:\n  lr: 5.0e-3\n")
    with pytest.raises(SweepError, match="changed since the sweep"):
        start_sweep(new_sweep(tmp_path / "s", str(config), ["seed=1"], ["env.num_envs=8,16"],
                              None))


@pytest.mark.timeout(300)
def test_a_stopped_sweep_checkpoints_its_points_and_resumes_them(tmp_path: Path) -> None:
    """SIGTERM to the sweep (what Ctrl-C or a scheduler sends): the running point
    checkpoints and stops, no other point starts, and --resume trains on from the
    checkpoint to the same rows as an uninterrupted point."""
    sweep = tmp_path / "sweep"
    long = ["train.total_env_steps=3200", "train.eval_episodes=0", "train.tensorboard=false",
            "algo.num_steps=64", "env.num_envs=2", "algo.ppo.minibatch_size=64",
            "train.checkpoint_every=1000"]
    proc = subprocess.Popen([HPCRL, "sweep", "--seeds", "0-1", *sets(long), "--run-dir",
                             str(sweep)], stderr=subprocess.PIPE, text=True)
    first = RunDir(sweep / "seed=0")
    deadline = time.monotonic() + 120
    while not first.progress_path.exists() or len(first.progress_path.read_text()
                                                  .splitlines()) < 4:
        assert proc.poll() is None and time.monotonic() < deadline, "no progress"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err[-3000:]
    assert "stopped  seed=0" in err and "start  seed=1" not in err
    assert first.checkpoint_path.exists() and first.stopped_path.exists()
    rows_before = len(first.progress_path.read_text().splitlines()) - 1
    assert 3 <= rows_before < 25

    resumed = subprocess.run([HPCRL, "sweep", "--resume", str(sweep)], capture_output=True,
                             text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resume seed=0" in resumed.stderr and "start  seed=1" in resumed.stderr
    log = (sweep / "logs" / "seed=0.log").read_text()
    assert "train --resume" in log
    rows = first.progress_path.read_text().splitlines()[1:]
    assert [int(r.split(",")[1]) for r in rows] == list(range(1, 26))  # updates, no gap


def test_the_array_script_picks_each_task_s_point(tmp_path: Path) -> None:
    """`hpcrl slurm sweep` writes sweep.sbatch: one array task per unfinished point, each
    picking its run directory and overrides; a grid that changes the job's shape is
    refused."""
    sweep = tmp_path / "sweep"
    args = ["slurm", "sweep", "sync", "--seeds", "0-2", "--grid", "algo.lr=3e-4,1e-3",
            "--set", "algo.ppo.minibatch_size=64", "--nodes", "1", "--gpus-per-node", "2",
            "--max-running", "2", "--run-dir", str(sweep)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    text = (sweep / "sweep.sbatch").read_text()
    assert "#SBATCH --array=0-5%2" in text
    assert f"#SBATCH --output={sweep}/logs/slurm-%A_%a.out" in text
    assert "4) HPCRL_POINT=lr=1e-3,seed=1; HPCRL_POINT_SET=(algo.lr=1e-3 seed=1) ;;" in text
    assert 'RUN_DIR="$HPCRL_SWEEP_DIR/$HPCRL_POINT"' in text
    assert 'HPCRL_RENDERED_SET=(algo.ppo.minibatch_size=64 "${HPCRL_POINT_SET[@]}")' in text
    # bash runs the block: task 4 picks its point and the overrides it trains with
    probe = text.split("\nCONFIG=", 1)[0].split("#SBATCH --array", 1)[1].split("\n", 1)[1]
    probe += ('\nRUN_DIR="$HPCRL_SWEEP_DIR/$HPCRL_POINT"\n'
              'echo "$RUN_DIR" "${HPCRL_POINT_SET[@]}"\n')
    shown = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                           env={**os.environ, "SLURM_ARRAY_TASK_ID": "4"})
    assert shown.stdout.split() == [f"{sweep}/lr=1e-3,seed=1", "algo.lr=1e-3", "seed=1"]
    wrong = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                           env={**os.environ, "SLURM_ARRAY_TASK_ID": "9"})
    assert wrong.returncode == 2 and "no point of the sweep" in wrong.stderr

    (sweep / "lr=3e-4,seed=1").mkdir()
    (sweep / "lr=3e-4,seed=1" / "eval.json").write_text("{}")
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "#SBATCH --array=0,2-5%2" in (sweep / "sweep.sbatch"
                                                                  ).read_text()
    shape = CliRunner().invoke(main, ["slurm", "sweep", "async", "--grid",
                                      "scheme.collectors_per_worker=1,2", "--run-dir",
                                      str(tmp_path / "shapes")])
    assert shape.exit_code == 1 and "different shapes" in shape.output


def test_both_sweep_commands_name_the_sweep_directory_as_run_dir_s_default() -> None:
    for command in (["sweep", "--help"], ["slurm", "sweep", "--help"]):
        text = " ".join(CliRunner().invoke(main, command).output.split())
        assert "--run-dir DIRECTORY The sweep directory, one run directory per point below " \
               "it (default: runs/sweep-<time>)." in text, text
        assert "<job name>-<job id>" not in text


def test_a_point_whose_env_failed_for_good_is_not_a_stop_to_requeue() -> None:
    # its run checkpointed (and wrote a stop marker), but a requeue of the sweep would only
    # meet the broken env again: the sweep says so with status 4, not 3
    from hpcrl.experiments.sweep_runner import Outcome, exit_code

    def ended(*statuses: str) -> int:
        return exit_code([Outcome(None, s, 0, 1.0) for s in statuses])  # type: ignore[arg-type]

    assert ended("finished", "stopped") == 3
    assert ended("finished", "env failed", "stopped") == 4
    assert ended("env failed", "failed") == 1
    assert ended("finished") == 0
