"""PBT wired into runs: a member (of one process, or of two DD-PPO ranks) copies a better
leader's state and goes on in place with mutated values, its checkpoint takes the leader's
policy and optimiser but keeps its own counters, bad settings are refused before any member
starts, and ``hpcrl pbt`` (local processes, or the ranks of one mpiexec) trains a population
that survives a member killed mid-run."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from hpcrl.config.loader import from_dict
from hpcrl.errors import ConfigError
from hpcrl.placement.serial_run import train
from hpcrl.population.lineage import Lineage
from hpcrl.population.member_hook import score_of
from hpcrl.population.member_run import (
    adopt_state,
    check_population,
    hyperparameters,
    train_member,
)
from hpcrl.population.workspace import Snapshot, Workspace
from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic
from hpcrl.runtime.population_dir import PopulationDir

TINY = {"algo": {"num_steps": 128}, "env": {"num_envs": 8},
        "train": {"total_env_steps": 6144, "eval_episodes": 0, "log_interval_s": 1e9}}
PBT = {"members": 2, "interval_env_steps": 2048, "bottom_quantile": 0.5, "top_quantile": 0.5,
       "mutate": {"algo.lr": {"low": 1e-4, "high": 1e-2, "scale": "log"},
                  "algo.ppo.clip_range": {"low": 0.1, "high": 0.3, "scale": "linear"}}}


def population(**pbt: object) -> dict:
    return {**TINY, "pbt": {**PBT, **pbt}}


def env_steps(run: Path) -> list[int]:
    with open(run / "progress.csv") as f:
        return [int(row["env_steps"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def leader_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of another run of the same agent (seed 5, 2,048 env steps)."""
    run = tmp_path_factory.mktemp("leader") / "run"
    config = from_dict({**TINY, "seed": 5, "train": {**TINY["train"], "total_env_steps": 2048}})
    train(config, run, console=None)
    return run / "checkpoints" / "last.pt"


def test_a_member_copies_a_better_leader_and_goes_on_in_place(tmp_path, leader_checkpoint):
    root = tmp_path / "pop"
    leader = Snapshot(1, 2048, 1e9, {"algo.lr": 5e-3, "algo.ppo.clip_range": 0.25},
                      str(leader_checkpoint))
    Workspace(PopulationDir(root).exchange).publish(leader)
    train_member(from_dict(population()), root, 0, console=None)

    run = PopulationDir(root).member(0)
    assert env_steps(run) == list(range(1024, 6145, 1024))  # the dropped updates retrained
    copies = Lineage(PopulationDir(root).exchange).rows()
    assert {(r.member, r.copied_from) for r in copies} == {(0, 1)}
    assert sorted({r.env_steps for r in copies}) == [2048, 4096]  # each interval but the last
    last = {r.key: r.new for r in copies if r.env_steps == 4096}
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algo"]["lr"] == pytest.approx(last["algo.lr"])
    assert saved["algo"]["ppo"]["clip_range"] == pytest.approx(last["algo.ppo.clip_range"])
    assert saved["seed"] == 0  # member 0 trains with the population's seed + 0
    mine = Workspace(PopulationDir(root).exchange).read(0)
    assert mine is not None and mine.env_steps == 6144  # the last checkpoint published
    assert mine.hyperparameters == pytest.approx(last)


def test_a_stop_signal_before_the_reload_keeps_the_copy_for_the_requeue(
        tmp_path, leader_checkpoint, monkeypatch):
    import signal as signals

    from hpcrl.population.member_hook import MemberHook
    from hpcrl.runtime.signals import STOP_REQUEST

    root = tmp_path / "pop"
    Workspace(PopulationDir(root).exchange).publish(
        Snapshot(1, 2048, 1e9, {"algo.lr": 5e-3, "algo.ppo.clip_range": 0.25},
                 str(leader_checkpoint)))
    decide = MemberHook.after_checkpoint

    def then_a_signal(self, *args, **kwargs):  # SIGUSR1 while the dropped update trains
        copies = decide(self, *args, **kwargs)
        if copies:
            STOP_REQUEST.signum = signals.SIGUSR1
        return copies

    monkeypatch.setattr(MemberHook, "after_checkpoint", then_a_signal)
    stopped = train_member(from_dict(population()), root, 0, console=None)
    run = PopulationDir(root).member(0)
    assert stopped.preempted and (run / "stopped").exists()
    assert env_steps(run)[-1] == 3072  # the update after the interval, checkpointed
    [copy] = {(r.env_steps, r.key): r.new for r in Lineage(PopulationDir(root).exchange).rows()
              if r.key == "algo.lr"}.values()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algo"]["lr"] == pytest.approx(copy)  # the copy's values...
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    leader = load_checkpoint(leader_checkpoint)
    assert all(torch.equal(state["policy"]["state_dict"][k], v)  # ...and state
               for k, v in leader["policy"]["state_dict"].items())
    assert state["counters"]["env_steps"] == 3072
    monkeypatch.setattr(MemberHook, "after_checkpoint", decide)
    train_member(from_dict(population()), root, 0, console=None)  # the requeue
    assert env_steps(run) == list(range(1024, 6145, 1024))


def test_adopting_takes_the_leaders_policy_and_optimiser_and_keeps_own_counters(
        tmp_path, leader_checkpoint):
    own_run = tmp_path / "own"
    train(from_dict({**TINY, "train": {**TINY["train"], "total_env_steps": 4096}}), own_run,
          console=None)
    path = own_run / "checkpoints" / "last.pt"
    before, leader = load_checkpoint(path), load_checkpoint(leader_checkpoint)
    before["placement"]["updater"]["algorithm"]["progress"] = 0.25  # (own schedule's place)
    save_atomic(before, path)
    adopt_state(path, leader_checkpoint)
    after = load_checkpoint(path)
    for name, tensor in leader["policy"]["state_dict"].items():  # weights and obs/ret stats
        assert torch.equal(after["policy"]["state_dict"][name], tensor), name
    mine, theirs = after["placement"]["updater"], leader["placement"]["updater"]
    assert torch.equal(mine["algorithm"]["optimizer"]["exp_avg"],
                       theirs["algorithm"]["optimizer"]["exp_avg"])
    assert mine["algorithm"]["progress"] == 0.25  # the schedules follow own env steps
    assert after["counters"] == before["counters"]
    assert torch.equal(after["placement"]["collectors"][0]["obs"],
                       before["placement"]["collectors"][0]["obs"])  # own envs go on


@pytest.mark.parametrize("change, words", [
    ({"mutate": {"algo.num_steps": {"low": 64, "high": 256}}},
     ["pbt.mutate.algo.num_steps", "int-valued", "real-valued"]),
    ({"mutate": {"env.clip_obs": {"low": 5.0, "high": 10.0}}},
     ["pbt.mutate.env.clip_obs", "only keys of algo, replay, rnd"]),
    ({"mutate": {"algo.nope": {"low": 0.1, "high": 0.2}}},
     ["pbt.mutate.algo.nope", "no key algo.nope"]),
    ({"mutate": {}}, ["pbt.mutate is empty"]),
    ({"mutate": {"algo.gamma": {"low": 0.9, "high": 1.5, "scale": "linear"}}},
     ["pbt.mutate", "refused"]),
    ({"members": 1}, ["pbt.members", "at least 2"]),
])
def test_bad_settings_are_refused_before_any_member_starts(change, words):
    with pytest.raises(ConfigError) as err:
        check_population(from_dict(population(**change)))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_score_is_the_newest_evaluation_else_the_training_return(tmp_path):
    row = {"episode_return_mean": 12.5, "entropy": 0.3}
    assert score_of("mean_return", row, tmp_path / "eval.csv") == 12.5
    (tmp_path / "eval.csv").write_text("env_steps,mean_return\n100,3.0\n200,7.5\n")
    assert score_of("mean_return", row, tmp_path / "eval.csv") == 7.5
    assert score_of("entropy", row, tmp_path / "eval.csv") == 0.3
    with pytest.raises(ConfigError, match="does not report.*entropy"):
        score_of("loss", row, tmp_path / "eval.csv")


def test_members_start_from_values_drawn_by_the_population_seed():
    from hpcrl.population.member_run import _first_config

    config = from_dict(population())
    settings = check_population(config)
    first = [hyperparameters(_first_config(config, settings, k), settings) for k in range(3)]
    again = [hyperparameters(_first_config(config, settings, k), settings) for k in range(3)]
    assert first == again and first[0] != first[1]  # one seed, one population; spread out
    assert all(1e-4 <= v["algo.lr"] <= 1e-2 and 0.1 <= v["algo.ppo.clip_range"] <= 0.3
               for v in first)


def _member_pid(root: Path, member: int) -> int | None:
    words = ["pbt", "--run-dir", str(root), "--member", str(member)]
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmdline]
        if any(args[i:i + len(words)] == words for i in range(len(args))):
            return int(entry.name)
    return None


def _kill_member_at_its_first_interval(root: Path, launch: subprocess.Popen) -> list[int]:
    """SIGKILL member 1's own process once it has published its first interval (a node
    lost: no checkpoint at the kill); its progress rows until then."""
    snapshot = Workspace(PopulationDir(root).exchange).snapshot_path(1)
    deadline = time.monotonic() + 120
    while not snapshot.exists() and time.monotonic() < deadline and launch.poll() is None:
        time.sleep(0.05)
    pid = _member_pid(root, 1)
    assert pid is not None, "member 1 is not running"
    before = env_steps(PopulationDir(root).member(1))
    os.kill(pid, signal.SIGKILL)
    return before


@pytest.mark.timeout(240)
def test_hpcrl_pbt_trains_a_population_that_survives_a_member_killed_mid_run(tmp_path):
    root, cfg = tmp_path / "pop", tmp_path / "pbt.yaml"
    budget = {"train": {**TINY["train"], "total_env_steps": 24576}}
    cfg.write_text(yaml.safe_dump({**population(members=3, interval_env_steps=4096),
                                   **budget}))
    command = [sys.executable, "-m", "hpcrl.cli", "pbt", str(cfg), "--run-dir", str(root)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    _kill_member_at_its_first_interval(root, first)
    out, _ = first.communicate(timeout=180)
    assert first.returncode == 1 and "failed   member-01" in out, out
    assert "finished member-00" in out and "finished member-02" in out, out
    killed_at = env_steps(PopulationDir(root).member(1))[-1]
    assert killed_at < 24576

    again = subprocess.run(command[:4] + ["--run-dir", str(root)], env=env, text=True,
                           capture_output=True, timeout=180)
    assert again.returncode == 0, again.stderr
    assert "resume member-01" in again.stderr and "1 to train" in again.stderr, again.stderr
    for k in range(3):
        steps = env_steps(PopulationDir(root).member(k))
        assert steps == list(range(1024, 24577, 1024)), (k, steps)  # cut back, no gap
    table = again.stdout
    assert table.splitlines()[0].split()[:3] == ["member", "env", "steps"]
    assert all(f"{k:>8} {24576:>11,}" in table for k in range(3)), table


def _mpiexec() -> str:
    import shutil
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    assert found, "mpiexec not found: install the test extra (pip install -e '.[test]')"
    return found


@pytest.mark.timeout(240)
def test_members_as_the_ranks_of_one_mpiexec_survive_a_member_killed(tmp_path):
    root, cfg = tmp_path / "pop", tmp_path / "pbt.yaml"
    budget = {"train": {**TINY["train"], "total_env_steps": 24576}}
    cfg.write_text(yaml.safe_dump({**population(members=3, interval_env_steps=4096),
                                   **budget}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    wrong = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "hpcrl.cli", "pbt",
                            str(cfg), "--run-dir", str(tmp_path / "other")], env=env,
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and "launch 3 ranks (mpiexec -n 3)" in wrong.stderr, \
        wrong.stderr
    launch = subprocess.Popen([_mpiexec(), "-n", "3", sys.executable, "-m", "hpcrl.cli", "pbt",
                               str(cfg), "--run-dir", str(root)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    before = _kill_member_at_its_first_interval(root, launch)  # rank 1 supervises it
    out, _ = launch.communicate(timeout=180)
    assert launch.returncode == 0, out
    assert "member 1 ended with status 137: starting it again from its checkpoint" in out, out
    for k in range(3):
        steps = env_steps(PopulationDir(root).member(k))
        assert steps == list(range(1024, 24577, 1024)), (k, steps)  # cut back, no gap
    assert env_steps(PopulationDir(root).member(1))[:len(before) - 1] == before[:-1]


def test_a_member_process_gets_no_launcher_variables():
    from hpcrl.population.supervisor import member_environment

    launched = {"PMI_RANK": "1", "PMI_SIZE": "3", "PMI_FD": "7", "HYDRA_CONTROL_FD": "5",
                "OMPI_COMM_WORLD_SIZE": "3", "SLURM_PROCID": "1", "SLURM_NTASKS": "3",
                "PMIX_RANK": "1", "MPI_LOCALNRANKS": "3", "SLURM_JOB_ID": "42", "PATH": "/bin"}
    assert member_environment(launched) == {"SLURM_JOB_ID": "42", "PATH": "/bin"}


def test_hpcrl_train_says_it_does_not_read_the_pbt_section(tmp_path):
    from click.testing import CliRunner

    from hpcrl.cli import main

    cfg = tmp_path / "pbt.yaml"
    cfg.write_text(yaml.safe_dump({**population(), "train": {**TINY["train"],
                                                              "total_env_steps": 1024}}))
    out = CliRunner().invoke(main, ["train", str(cfg), "--run-dir", str(tmp_path / "run")],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "pbt section, which hpcrl train does not read" in out.output


@pytest.mark.timeout(240)
def test_a_member_of_two_ddppo_ranks_copies_and_goes_on_in_place(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ddppo = {"scheme": {"preset": "ddppo", "gradient_workers": 2}, "env": {"num_envs": 4}}
    leader_run = tmp_path / "leader"
    leader_cfg = tmp_path / "leader.yaml"
    leader_cfg.write_text(yaml.safe_dump({**TINY, **ddppo, "seed": 5, "train": {
        **TINY["train"], "total_env_steps": 2048}}))
    made = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "hpcrl.cli", "train",
                           str(leader_cfg), "--run-dir", str(leader_run)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    root, cfg = tmp_path / "pop", tmp_path / "pbt.yaml"
    cfg.write_text(yaml.safe_dump({**population(), **ddppo}))
    Workspace(PopulationDir(root).exchange).publish(Snapshot(
        1, 2048, 1e9, {"algo.lr": 5e-3, "algo.ppo.clip_range": 0.25},
        str(leader_run / "checkpoints" / "last.pt")))
    command = [sys.executable, "-m", "hpcrl.cli", "pbt", str(cfg), "--run-dir", str(root)]
    refused = subprocess.run([_mpiexec(), "-n", "2", *command], env=env, capture_output=True,
                             text=True, timeout=120)  # a rank a member: one process each
    assert refused.returncode == 1 and "start each member's ranks with --member K" in \
        refused.stderr, refused.stderr
    done = subprocess.run([_mpiexec(), "-n", "2", *command, "--member", "0"], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("member 0 goes on from member 1's state") == 2, done.stderr
    run = PopulationDir(root).member(0)
    assert env_steps(run) == list(range(1024, 6145, 1024))  # each rank 4 envs x 128 steps
    copies = Lineage(PopulationDir(root).exchange).rows()
    last = {r.key: r.new for r in copies if r.env_steps == 4096}
    assert yaml.safe_load((run / "config.yaml").read_text())["algo"]["lr"] == \
        pytest.approx(last["algo.lr"])
    assert load_checkpoint(run / "checkpoints" / "last.pt")["world_size"] == 2


@pytest.mark.parametrize("args, words", [
    (["--member", "0", "--jobs", "2"], "--jobs says how many members"),
    (["--restarts", "1"], "--restarts is for a launch of one rank a member"),
])
def test_options_a_mode_would_not_use_are_refused(tmp_path, args, words):
    from click.testing import CliRunner

    from hpcrl.cli import main

    cfg = tmp_path / "pbt.yaml"
    cfg.write_text(yaml.safe_dump(population()))
    out = CliRunner().invoke(main, ["pbt", str(cfg), "--run-dir", str(tmp_path / "p"), *args])
    assert out.exit_code == 2 and words in out.output, out.output
    assert not (tmp_path / "p").exists()  # refused before the population was made
