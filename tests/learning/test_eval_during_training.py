"""Evaluation during training (train.eval_every: eval.csv, checkpoints/best.pt, --best and
best=True), train.keep_checkpoints, and W&B logging through a stand-in wandb package."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import hpcrl
from hpcrl import api
from hpcrl.cli import main
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

FAKES = (Path(__file__).parents[1] / "fakes")
RUN = ["train.total_env_steps=4096", "train.eval_every=1024", "train.eval_episodes=3",
       "train.tensorboard=false", "algo.num_steps=128", "env.num_envs=2",
       "algo.ppo.minibatch_size=128", "train.checkpoint_every=4"]


def eval_rows(run: Path) -> list[dict[str, str]]:
    with open(run / "eval.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_evaluations_during_training_write_their_curve_and_keep_the_best(tmp_path: Path
                                                                         ) -> None:
    run = tmp_path / "run"
    result = api.train(None, sets=[*RUN, "train.keep_checkpoints=2"], run_dir=run,
                       console=None)
    rows = eval_rows(run)
    # one row per 1024 env steps crossed (updates of 256 steps), the final evaluation last
    assert [int(r["env_steps"]) for r in rows] == [1024, 2048, 3072, 4096]
    assert [int(r["updates"]) for r in rows] == [4, 8, 12, 16]
    assert float(rows[-1]["mean_return"]) == pytest.approx(result.evaluation["mean_return"])
    best = max(rows, key=lambda r: float(r["mean_return"]))
    saved = load_checkpoint(RunDir(run).best_path)
    assert saved["counters"]["env_steps"] == int(best["env_steps"])
    assert saved["evaluation"]["mean_return"] == pytest.approx(float(best["mean_return"]))
    # the best policy plays the same episodes to the same return, from the CLI and the API
    out = CliRunner().invoke(main, ["eval", str(run), "--best", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["mean_return"] == pytest.approx(float(best["mean_return"]))
    table = CliRunner().invoke(main, ["runs", str(run), "--json"])
    assert json.loads(table.output)[0]["best_eval_return"] == float(best["mean_return"])
    policy = hpcrl.load_policy(run, best=True)
    last = hpcrl.load_policy(run)
    assert isinstance(policy, type(last))
    # keep_checkpoints=2: the last two checkpoints (every 4 updates), the newest is last.pt
    kept = sorted(p.name for p in (run / "checkpoints").glob("steps-*.pt"))
    assert kept == ["steps-3072.pt", "steps-4096.pt"]
    assert os.path.samefile(run / "checkpoints" / "steps-4096.pt", RunDir(run).checkpoint_path)
    assert load_checkpoint(run / "checkpoints" / "steps-3072.pt")["counters"]["updates"] == 12

    plain = tmp_path / "plain"
    api.train(None, sets=["train.total_env_steps=512", "train.eval_episodes=1",
                          "train.tensorboard=false"], run_dir=plain, console=None)
    missing = CliRunner().invoke(main, ["eval", str(plain), "--best"])
    assert missing.exit_code == 1 and "train.eval_every > 0" in missing.output
    assert not (plain / "eval.csv").exists()
    assert [p.name for p in (plain / "checkpoints").iterdir()] == ["last.pt"]


def test_a_stopped_and_resumed_run_has_the_curve_of_an_uninterrupted_one(tmp_path: Path
                                                                         ) -> None:
    reference = tmp_path / "ref"
    api.train(None, sets=RUN, run_dir=reference, console=None)
    run = tmp_path / "run"

    def stop_after_rows() -> None:
        progress = run / "progress.csv"
        while not progress.exists() or len(progress.read_text().splitlines()) < 7:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGUSR1)  # what Slurm's warning signal does

    threading.Thread(target=stop_after_rows, daemon=True).start()
    stopped = api.train(None, sets=RUN, run_dir=run, console=None)
    assert stopped.preempted
    steps = load_checkpoint(RunDir(run).checkpoint_path)["counters"]["env_steps"]
    assert 1024 < steps < 4096
    resumed = api.resume(run, console=None)  # a stop earlier in this process is forgotten
    assert not resumed.preempted

    def curve(path: Path) -> list[tuple[str, ...]]:  # all but the wall-clock time
        return [(r["env_steps"], r["updates"], r["mean_return"], r["std_return"])
                for r in eval_rows(path)]
    assert curve(run) == curve(reference) and len(curve(run)) == 4


def test_bad_eval_and_checkpoint_keys_are_refused(tmp_path: Path) -> None:
    for sets, says in ((["train.eval_every=100", "train.eval_episodes=0"],
                        "set train.eval_episodes >= 1"),
                       (["train.keep_checkpoints=0"], "train.keep_checkpoints"),
                       (["train.wandb.group=g"], "train.wandb.project is empty")):
        out = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path / "x"),
                                        *[a for s in sets for a in ("--set", s)]])
        assert out.exit_code == 1 and says in out.output, out.output
    # wandb is no dependency: without it, naming a project is refused before training
    hpcrl_bin = str(Path(sys.executable).with_name("hpcrl"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([hpcrl_bin, "train", "--run-dir", str(tmp_path / "w"), "--set",
                           "train.wandb.project=p"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 1 and "pip install wandb" in done.stderr, done.stderr
    assert not (tmp_path / "w").exists()


def test_wandb_gets_the_progress_rows_and_a_resume_continues_its_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FAKES))
    log = tmp_path / "wandb.jsonl"
    monkeypatch.setenv("FAKE_WANDB_LOG", str(log))
    run = tmp_path / "run"
    sets = ["train.total_env_steps=1024", "train.eval_episodes=1", "train.tensorboard=false",
            "train.wandb.project=hpcrl-tests", "train.wandb.group=sweep-1", "seed=4"]
    api.train(None, sets=sets, run_dir=run, console=None)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    init = calls[0]
    assert init["call"] == "init" and init["project"] == "hpcrl-tests"
    assert init["group"] == "sweep-1" and init["entity"] is None and init["mode"] == "offline"
    assert init["dir"] == str(run) and init["name"] == "run" and init["config_seed"] == 4
    assert init["id"] == (run / "wandb-id").read_text().strip()
    assert {"call": "define_metric", "name": "*", "step_metric": "env_steps"} in calls
    logged = [c["data"] for c in calls if c["call"] == "log"]
    with open(run / "progress.csv", newline="") as f:
        progress = list(csv.DictReader(f))
    assert [d["env_steps"] for d in logged] == [int(r["env_steps"]) for r in progress]
    assert [d["updates"] for d in logged] == [int(r["updates"]) for r in progress]
    assert calls[-1]["call"] == "finish"

    log.unlink()
    api.resume(run, sets=["train.total_env_steps=1536"], console=None)
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert again[0]["id"] == init["id"] and again[0]["resume"] == "allow"
    assert [c["data"]["env_steps"] for c in again if c["call"] == "log"] == [1280, 1536]


def test_a_resumed_curve_written_before_the_truncated_column_gets_it(tmp_path: Path) -> None:
    """eval.csv of a run that an earlier hpcrl wrote has no 'truncated' column: the rows a
    resume keeps are written again under today's header, so the rows it appends line up."""
    import csv

    from hpcrl.learning.eval_curve import COLUMNS, kept_rows

    path = tmp_path / "eval.csv"
    path.write_text("env_steps,updates,wall_time_s,mean_return,std_return,episodes\n"
                    "100,1,1.5,10,1,2\n200,2,3,20,2,2\n300,3,4.5,30,3,2\n")
    kept = kept_rows(path, 200)
    assert [r["env_steps"] for r in kept] == ["100", "200"]
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == COLUMNS
    assert [(r["mean_return"], r["truncated"]) for r in rows] == [("10", ""), ("20", "")]
