"""A league job of several trained policies (the ``policies`` section): each policy's config,
the launch's ranks shared out, the refusals before any rank starts, and the parts each
policy's run adds to self-play (opponents drawn from chosen policies, its own snapshots and
matches, AlphaStar's resets)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcrl.api import train
from hpcrl.config.loader import from_dict
from hpcrl.config.policy_configs import policy_config, rank_split
from hpcrl.envs.multiagent.matches import LOSS, WIN
from hpcrl.errors import ConfigError
from hpcrl.league.match_log import MatchLog, MatchRow, read_matches
from hpcrl.league.resets import reset_checkpoint, save_initial_weights
from hpcrl.league.selfplay_env import SelfPlayEnv
from hpcrl.league.snapshot_hook import SnapshotHook
from hpcrl.league.snapshots import drop_after, publish, snapshots
from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic
from hpcrl.sections.league_section import LeagueConfig

TICTACTOE = "pettingzoo.classic.tictactoe_v3"
BASE = {"env": {"id": TICTACTOE, "num_envs": 8, "league": {"snapshot_every": 1000}},
        "algo": {"name": "ppo", "num_steps": 64, "lr": 0.001, "ent_coef": 0.01},
        "actor": {"action_mask": True, "hidden_sizes": [32, 32]},
        "train": {"total_env_steps": 4096, "eval_episodes": 20}}
TWO = {**BASE, "policies": {"main": {}, "exploiter": {"role": "main_exploiter",
                                                       "set": {"algo.lr": 0.002}}}}


def _with(**sections):
    return {**BASE, **sections}


@pytest.mark.quick
@pytest.mark.parametrize("data, says", [
    ({"policies": {"main": {}, "b": {}}}, "names the trained policies of a self-play league; "
     "env.id CartPole-v1 is not played by a league"),
    (_with(policies={"random": {}}), "is not random or latest"),
    (_with(policies={"main": {"role": "coach"}}), "'policies.main.role' ('coach'): one of"),
    (_with(policies={"main": {"rank": 2}}), "has unknown keys ['rank']"),
    (_with(policies={"main": {"ranks": 0}}), "'policies.main.ranks' (0): a whole number"),
    (_with(policies={"main": {"set": {"env.id": "x"}}}), "every policy plays the same game"),
    (_with(policies={"x": {"role": "main_exploiter"}}), "has no policy of role 'main'"),
    (_with(policies={"main": {}, "b": {"set": {"env.league.versus": ["c"]}}}),
     "names ['c'], neither a policy of the job nor a frozen one"),
    (_with(policies={"main": {}}, pbt={"mutate": {"algo.lr": {"low": 1e-4, "high": 1e-3}}}),
     "a population of league jobs is not built"),
])
def test_a_policies_section_that_cannot_work_is_refused_naming_the_fix(data, says):
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert says in str(err.value)


@pytest.mark.quick
def test_each_policy_trains_its_own_config_with_its_role_s_league_keys():
    job = from_dict({**TWO, "policies": {**TWO["policies"],
                                         "scout": {"role": "league_exploiter", "ranks": 2}}})
    main, exploiter, scout = (policy_config(job, n) for n in ("main", "exploiter", "scout"))
    assert (main.seed, exploiter.seed, scout.seed) == (0, 1_000_000, 2_000_000)
    assert main.env.league.player == "main" and main.env.league.reset_fraction == 0
    assert main.policies == {} and main.algo.lr == 0.001
    assert exploiter.algo.lr == 0.002  # its own set
    assert exploiter.env.league.versus == ["main"]
    assert (exploiter.env.league.opponents, exploiter.env.league.reset_fraction,
            exploiter.env.league.win_threshold, exploiter.env.league.snapshot_every) == (
        "latest", 1.0, 0.7, 2000)
    assert (scout.env.league.versus, scout.env.league.opponents,
            scout.env.league.reset_fraction) == ([], "pfsp", 0.25)
    assert rank_split(job, 4) == [("main", 1), ("exploiter", 1), ("scout", 2)]
    assert rank_split(job, 6) == [("main", 2), ("exploiter", 2), ("scout", 2)]
    with pytest.raises(ConfigError, match="launch it on 4 ranks or more"):
        rank_split(job, 3)
    with pytest.raises(ConfigError, match=r"set policies.<name>.ranks to add up to 5"):
        rank_split(job, 5)
    with pytest.raises(ConfigError, match="policy 'exploiter' .*algo.no_such_key"):
        policy_config(from_dict({**TWO, "policies": {"main": {}, "exploiter": {
            "set": {"algo.no_such_key": 1}}}}), "exploiter")


@pytest.mark.quick
def test_one_process_is_refused_several_policies_before_any_work(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"launched on 1 rank\(s\): launch it on 2 ranks or "
                       r"more \(`mpiexec -n 2 hpcrl train"):
        train(from_dict(TWO), run_dir=tmp_path / "run", console=None)
    assert not (tmp_path / "run").exists()
    # a reset belongs to a policy of a league job, whose loop goes back to its start
    with pytest.raises(ConfigError, match=r"set it in a policies entry, e.g. policies: "
                       r"\{main: \{set: \{env.league.reset_fraction: 0.25\}\}\}"):
        train(from_dict({**BASE, "env": {**BASE["env"], "league": {
            "reset_fraction": 0.25}}}), run_dir=tmp_path / "lone", console=None)


def _league_with(folder: Path, names: list[str]) -> None:
    for name in names:
        policy, steps = name.rsplit("-", 1)
        publish(folder, policy, int(steps), {"weights": name})


@pytest.mark.quick
def test_an_env_draws_only_the_policies_it_plays_and_a_hook_keeps_to_its_own(tmp_path: Path):
    league = tmp_path / "league"
    _league_with(league, ["main-100", "exploiter-150", "main-200", "exploiter-300"])
    env = SelfPlayEnv(TICTACTOE, opponents="uniform", player="exploiter",
                      league_dir=str(league), versus=("main",))
    env.reset(seed=3)
    seen = set()
    for _ in range(40):
        env._begin_match()
        seen.add(env.opponent)
    assert seen == {"main-100", "main-200"}
    env.close()
    # the hook of one policy removes only its own later snapshots on a resume, and counts only
    # its own matches towards its win threshold
    hook = SnapshotHook(league, LeagueConfig(player="exploiter", snapshot_every=0,
                                             win_threshold=0.6, threshold_matches=4), 200)
    assert [s.name for s in snapshots(league)] == ["main-100", "exploiter-150", "main-200"]
    log = MatchLog(league, 7)
    for match, (player, outcome) in enumerate([("main", LOSS)] * 4 + [("exploiter", WIN)] * 3):
        log.append(MatchRow(time.time(), 7, match, match, player, "a", "x", "b", outcome, 0, 5))
    assert not hook.due(250)  # three of its own wins: the main's losses do not count
    log.append(MatchRow(time.time(), 7, 8, 8, "exploiter", "a", "x", "b", WIN, 0, 5))
    assert hook.due(250)
    assert [s.name for s in drop_after(league, 120, "main")] == ["main-200"]


@pytest.mark.quick
def test_a_reset_goes_back_to_the_initial_weights_and_clears_the_optimiser(tmp_path: Path):
    actor = torch.nn.Sequential(torch.nn.Linear(3, 2))
    save_initial_weights(actor, tmp_path)
    start = {k: v.clone() for k, v in actor.state_dict().items()}
    trained = {k: v + 1 for k, v in start.items()}
    state = {"policy": {"state_dict": {**trained, "obs_rms.mean": torch.ones(3)}},
             "placement": {"updater": {"algorithm": {
                 "optimizer": {"kind": "adam", "steps": 7, "exp_avg": torch.ones(8),
                               "exp_avg_sq": torch.ones(8)}, "progress": 0.4}}},
             "counters": {"env_steps": 900}}
    path = tmp_path / "last.pt"
    save_atomic(state, path)
    save_initial_weights(torch.nn.Sequential(torch.nn.Linear(3, 2)), tmp_path)  # kept: once
    reset_checkpoint(path, tmp_path / "initial-weights.pt")
    after = load_checkpoint(path)
    for key, value in start.items():
        assert torch.equal(after["policy"]["state_dict"][key], value)
    assert torch.equal(after["policy"]["state_dict"]["obs_rms.mean"], torch.ones(3))
    optimiser = after["placement"]["updater"]["algorithm"]["optimizer"]
    assert optimiser["steps"] == 0 and not optimiser["exp_avg"].any()
    assert after["placement"]["updater"]["algorithm"]["progress"] == 0.4
    assert after["counters"]["env_steps"] == 900
    # the draw of a reset is the policy's and the snapshot's: the same on a resume
    hook = SnapshotHook(tmp_path / "league", LeagueConfig(player="x", reset_fraction=0.5))
    draws = []
    for steps in range(1000, 21000, 1000):
        save_atomic({"policy": {"state_dict": {}}}, path)
        draws.append(hook.after_checkpoint(path, steps, {}, final=False))
    assert 4 <= sum(draws) <= 16
    again = SnapshotHook(tmp_path / "league2", LeagueConfig(player="x", reset_fraction=0.5))
    assert draws == [again.after_checkpoint(path, s, {}, final=False)
                     for s in range(1000, 21000, 1000)]


def test_one_named_policy_trains_in_one_process_in_its_own_run(tmp_path: Path):
    data = {**BASE, "policies": {"alice": {"set": {"train.total_env_steps": 2048}}}}
    result = train(from_dict(data), run_dir=tmp_path / "run", console=None)
    run = tmp_path / "run"
    assert (run / "config.yaml").is_file() and (run / "policies/alice/checkpoints").is_dir()
    assert [s.name for s in snapshots(run / "league")] == ["alice-1024", "alice-2048"]
    assert {m.player for m in read_matches(run / "league")} == {"alice"}
    assert result.evaluation is not None
    # the checkpoint keeps the win threshold's count of recent matches for a resume
    saved = load_checkpoint(run / "policies/alice/checkpoints/last.pt")
    assert set(saved["interval"]) == {"recent", "offsets", "joins"}
    assert all(name.startswith("env-") for name in saved["interval"]["offsets"])
    with pytest.raises(ConfigError, match="already holds a league job"):
        train(from_dict(data), run_dir=run, console=None)


sys.path.insert(0, str(Path(__file__).parents[1] / "placement" / "mpi"))
from mpirun import mpiexec  # noqa: E402


@pytest.mark.timeout(240)
def test_a_main_and_its_exploiter_train_on_ranks_of_their_own_and_resume(tmp_path: Path):
    """Two policies under ``mpiexec -n 2``: each a run of its own, one league; the exploiter
    plays the main's snapshots only and starts again after each of its own joins; a stop
    signal checkpoints both, and the job resumes to its budget."""
    import yaml

    config = tmp_path / "league.yaml"
    config.write_text(yaml.safe_dump({**TWO, "train": {**BASE["train"],
                                                       "total_env_steps": 12288}}))
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "hpcrl.cli", "train", str(config),
           "--run-dir", str(run)]
    job = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(
            s.policy == "exploiter" for s in snapshots(run / "league")):
        time.sleep(0.2)
    job.send_signal(signal.SIGTERM)  # (mpiexec forwards it to every rank)
    _, stopped = job.communicate(timeout=120)
    assert job.returncode == 3, stopped[-3000:]
    assert f"continue with `{mpiexec().rsplit('/', 1)[0]}" in stopped or (
        f"hpcrl train --resume {run}" in stopped), stopped[-2000:]
    assert stopped.count("received SIGTERM") == 1  # one rank of the launch says it
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "hpcrl.cli", "train",
                           "--resume", str(run)], env=env, capture_output=True, text=True,
                          timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    out = stopped + done.stderr
    assert "[main] steps" in out and "[exploiter] steps" in out
    assert "exploiter starts again from its initial weights after 2,048 env steps" in out
    names = [s.name for s in snapshots(run / "league")]
    for policy, every in (("main", 1024), ("exploiter", 2048)):
        steps = [int(n.rsplit("-", 1)[1]) for n in names if n.startswith(policy + "-")]
        assert steps == list(range(every, 12288 + 1, every)), names
        assert (run / "policies" / policy / "eval.json").is_file()
    matches = read_matches(run / "league")
    against = {(m.player, m.opponent.rsplit("-", 1)[0]) for m in matches}
    assert ("exploiter", "main") in against and ("main", "exploiter") in against
    assert not {o for p, o in against if p == "exploiter"} - {"main", "random"}
    table = subprocess.run([sys.executable, "-m", "hpcrl.cli", "league", str(run)],
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "exploiter: rating" in table.stdout, table.stderr
    whole = subprocess.run([sys.executable, "-m", "hpcrl.cli", "eval", str(run)],
                           capture_output=True, text=True, timeout=60)
    assert whole.returncode == 2 and "a league job of several policies (exploiter, main)" \
        in whole.stderr and f"hpcrl eval {run}/policies/exploiter" in whole.stderr, whole.stderr
    assert np.isfinite([m.ret for m in matches]).all()
    # the main learnt beside its exploiter: it beats random play (about 0 for random play,
    # whose seats alternate; 0.8 and more seen at this budget)
    import json

    main_eval = json.loads((run / "policies/main/eval.json").read_text())
    assert main_eval["mean_return"] >= 0.5, main_eval


@pytest.mark.quick
def test_the_win_threshold_s_count_comes_back_from_a_checkpoint(tmp_path: Path):
    """A resumed hook counts the matches since the newest snapshot as the one that wrote the
    checkpoint did: the same snapshot joins at the same env steps; a hook that started
    counting afresh (the old rule) would not."""
    league = tmp_path / "league"
    config = LeagueConfig(snapshot_every=0, win_threshold=0.5, threshold_matches=100)
    log = MatchLog(league, 3)

    def play(first: int, count: int, outcome: str) -> None:
        for match in range(first, first + count):
            log.append(MatchRow(time.time(), 3, match, match, "main", "a", "x", "b", outcome,
                                0, 5))

    hook = SnapshotHook(league, config)
    play(0, 80, WIN)
    state = hook.state(1000)  # a checkpoint after 80 wins, no snapshot due yet
    assert len(state["recent"]) == 80 and not hook.due(1000)
    resumed = SnapshotHook(league, config, 1000, state)
    afresh = SnapshotHook(league, config, 1000)
    play(80, 30, WIN)
    assert hook.due(1500) and resumed.due(1500)  # 100 matches counted, all won
    assert not afresh.due(1500)  # 30 counted: the threshold waits for 100
    # at a checkpoint where a snapshot joins, the count starts again there
    assert hook.state(1500)["recent"] == []


@pytest.mark.quick
def test_a_snapshot_a_stop_left_due_is_published_on_the_resume(tmp_path: Path):
    """A stop signal's checkpoint publishes no snapshot, even where one was due: the resume
    publishes it from that checkpoint, as the run never stopped did at those env steps."""
    league, checkpoint = tmp_path / "league", tmp_path / "last.pt"
    save_atomic({"policy": {"state_dict": {"w": torch.ones(2)}}}, checkpoint)
    config = LeagueConfig(snapshot_every=1000)
    publish(league, "main", 1000, {"state_dict": {}})
    SnapshotHook(league, config, 2048, {"recent": [], "offsets": {}, "joins": True}, checkpoint)
    assert [s.name for s in snapshots(league)] == ["main-1000", "main-2048"]
    assert torch.equal(load_checkpoint(snapshots(league)[-1].path)["state_dict"]["w"],
                       torch.ones(2))
    SnapshotHook(league, config, 2560, {"recent": [], "offsets": {}, "joins": False},
                 checkpoint)  # not due there: nothing
    # a checkpoint from before the hook kept its state: the periodic schedule decides
    SnapshotHook(league, config, 3072, None, checkpoint)
    assert [s.name for s in snapshots(league)] == ["main-1000", "main-2048", "main-3072"]


@pytest.mark.quick
def test_an_exploiter_stopped_at_its_snapshot_resets_on_the_resume(tmp_path: Path):
    """A stop at the update where an exploiter's snapshot was due: the resume publishes the
    snapshot with the weights reached, then takes the exploiter back to its start, as the run
    never stopped did at that update (the reset drawn from the name and the env steps)."""
    from hpcrl.placement.league_job import _settle_a_stop

    run, league = tmp_path / "policies" / "x", tmp_path / "league"
    actor = torch.nn.Sequential(torch.nn.Linear(3, 2))
    save_initial_weights(actor, run)
    start = {k: v.clone() for k, v in actor.state_dict().items()}
    reached = {k: v + 1 for k, v in start.items()}
    checkpoint = run / "checkpoints" / "last.pt"
    checkpoint.parent.mkdir(parents=True)
    save_atomic({"counters": {"env_steps": 2048}, "policy": {"state_dict": dict(reached)},
                 "interval": {"recent": [], "offsets": {}, "joins": True},
                 "placement": {"updater": {"algorithm": {"optimizer": {
                     "steps": 3, "exp_avg": torch.ones(4)}}}}}, checkpoint)
    config = LeagueConfig(player="x", reset_fraction=1.0)
    _settle_a_stop(config, league, run, 10_000, None)
    (snap,) = snapshots(league)
    assert snap.name == "x-2048"
    assert torch.equal(load_checkpoint(snap.path)["state_dict"]["0.weight"],
                       reached["0.weight"])
    after = load_checkpoint(checkpoint)
    assert torch.equal(after["policy"]["state_dict"]["0.weight"], start["0.weight"])
    _settle_a_stop(config, league, run, 10_000, None)  # a second resume: nothing more
    assert len(snapshots(league)) == 1
