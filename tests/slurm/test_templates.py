"""The job templates on the local Slurm test cluster: every template trains a tiny config,
with the world size and roles of `hpcrl plan`, and GPUs on the learner tasks only.

The cluster's GPUs are fake (node Gres=gpu:4 over /dev/null): they exercise Slurm's GPU
bookkeeping (CUDA_VISIBLE_DEVICES), while the ranks train on the CPU (train.device=cpu).
Needs ``bash tests/slurm/cluster.sh start`` (see conftest.py for skip/CI rules); the jobs
are built by template_jobs.py.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import slurmtools as st
import yaml
from template_jobs import (
    HERE,
    HPCRL,
    PACE,
    check_trained,
    check_world,
    gpus_of,
    job_env,
    log_text,
    plan_of,
    ranks_seen,
    render_job,
    rows,
    write_config,
)

from hpcrl.league.match_log import read_matches
from hpcrl.league.snapshots import snapshots
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.slurm.templates import template_path

pytestmark = pytest.mark.slurm


@pytest.mark.timeout(240)
def test_a_template_runs_components_of_ones_own(tmp_path: Path) -> None:
    """The README's example components by import path, their directory put on the path by
    HPCRL_SETUP: the template runs them on 2 DD-PPO ranks unchanged."""
    examples = Path(__file__).parents[2] / "examples"
    config = write_config(tmp_path, {
        "scheme": {"preset": "ddppo"},
        "algo": {"name": "custom_components:KLPenaltyPPO", "kwargs": {"target_kl": 0.02}},
        "actor": {"network": "custom_components:SquashEncoder", "hidden_sizes": [32]},
        "env": {"wrappers": ["custom_components:TimePenalty"]}})
    sys.path.insert(0, str(examples))  # the test's own check of the config imports them too
    _, script = render_job(tmp_path, "sync", "lab", config=str(config), nodes=1,
                           gpus_per_node=2)
    env = job_env(tmp_path / "probe")
    env["HPCRL_SETUP"] += f"; export PYTHONPATH={examples}:${{PYTHONPATH:-}}"
    job = st.submit(script, env=env)
    st.assert_completed(job, timeout=200)
    check_trained(tmp_path, "lab", job, 2)
    assert "kl_beta" in rows(tmp_path / "lab")[0]
    saved = load_checkpoint(RunDir(tmp_path / "lab").checkpoint_path)
    assert saved["policy"]["config"]["algo"]["name"] == "custom_components:KLPenaltyPPO"


@pytest.mark.timeout(240)
def test_sync_template_all_reduces_over_two_nodes(tmp_path: Path) -> None:
    # one minibatch per update: a preempted straggler's shorter rollout still splits into it
    config = write_config(tmp_path, {"scheme": {"preset": "ddppo"},
                                     "algo": {"ppo": {"minibatch_size": 128,
                                                      "num_epochs": 1}}})
    rendered, script = render_job(tmp_path, "sync", "sync", config=str(config), nodes=2,
                                  gpus_per_node=2)
    plan = plan_of(config, rendered)
    assert plan["world_size"] == 4 and plan["summary"] == "4 gradient workers"
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    st.assert_completed(job, timeout=200)

    ranks = check_world(tmp_path / "probe", plan)
    nodes = [r["node"] for r in ranks]
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3], f"2 tasks per node: {nodes}"
    for r in ranks:  # one task per GPU; each sees its node's GPUs and picks its own
        assert len(gpus_of(r)) == 2, r
    check_trained(tmp_path, "sync", job, 4)


@pytest.mark.timeout(240)
def test_async_template_puts_learners_on_gpus_and_collectors_on_cpus(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"scheme": {"preset": "async-ppo",
                                                "collectors_per_worker": 1}})
    rendered, script = render_job(tmp_path, "async", "async", config=str(config), nodes=1,
                                  gpus_per_node=2)
    plan = plan_of(config, rendered)
    assert [r["role"] for r in plan["ranks"]] == ["gradient_worker"] * 2 + ["collector"] * 2
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    assert len(st.job_records(job)) == 2, "not a heterogeneous job"
    st.assert_completed(job, timeout=200)
    assert {r["JobState"] for r in st.job_records(job)} == {"COMPLETED"}

    ranks = check_world(tmp_path / "probe", plan)
    for r, role in zip(ranks, plan["ranks"], strict=False):
        if role["role"] == "collector":
            assert gpus_of(r) == [], f"a collector got a GPU: {r}"
        else:
            assert len(gpus_of(r)) == 1, f"a learner without its GPU: {r}"
    learners = ranks[:2]
    assert len({r["cuda"] for r in learners}) == 2, "learners share a GPU"
    assert learners[0]["node"] == learners[1]["node"]
    check_trained(tmp_path, "async", job, 4)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("preset, extra", [
    ("apex", {"replay": {"learning_starts": 64, "batch_size": 16}}),
    # IMPALA's job plays self-play on tic-tac-toe: a league job from one config on the
    # template, its collectors (with their envs in subprocesses) on other ranks than the
    # learner that publishes snapshots
    ("impala", {"env": {"id": "pettingzoo.classic.tictactoe_v3", "vectorization": "async",
                        "league": {"snapshot_every": 256}}, "actor": {"action_mask": True}}),
])
def test_async_template_runs_the_impala_and_apex_presets(tmp_path: Path, preset: str,
                                                         extra: dict[str, Any]) -> None:
    config = write_config(tmp_path, {"scheme": {"preset": preset}, **extra})
    rendered, script = render_job(tmp_path, "async", preset, config=str(config), nodes=1,
                                  gpus_per_node=1)
    plan = plan_of(config, rendered)
    assert [r["role"] for r in plan["ranks"]] == ["gradient_worker"] + ["collector"] * 2
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    st.assert_completed(job, timeout=200)
    check_world(tmp_path / "probe", plan)
    check_trained(tmp_path, preset, job, 3)
    saved = load_checkpoint(RunDir(tmp_path / preset).checkpoint_path)
    if preset == "apex":  # the learner's replay, filled by both collectors
        assert int(saved["placement"]["updater"]["learner"]["replay"]["size"]) > 0
    assert sorted(s["env_offset"] for s in saved["placement"]["collectors"]) == [0, 2]
    if preset == "impala":  # the league: snapshots by rank 0, matches by both collectors
        league = tmp_path / preset / "league"
        assert len(snapshots(league)) >= 3
        assert {m.env_seed for m in read_matches(league)} == {0, 1, 2, 3}


@pytest.mark.timeout(240)
def test_async_template_puts_an_inference_rank_on_a_gpu_beside_the_learner(tmp_path: Path
                                                                         ) -> None:
    """`hpcrl slurm render async` with scheme.inference_ranks: the inference rank takes a
    GPU task of component 0 after the learner, the collectors stay CPU tasks, and the job
    trains with the collectors acting on it. The job plays a cooperative game whose three
    agents share the policy (env.agents=shared): the inference rank acts for every agent
    of each collector's games, which send every agent's steps to the learner."""
    config = write_config(tmp_path, {"scheme": {"preset": "impala", "inference_ranks": 1},
                                     "env": {"id": "mpe2.simple_spread_v3", "multiagent": True,
                                             "num_envs": 3},
                                     "actor": {"action_mask": True}})
    rendered, script = render_job(tmp_path, "async", "inference", config=str(config),
                                  nodes=1, gpus_per_node=2)
    plan = plan_of(config, rendered)
    assert [r["role"] for r in plan["ranks"]] == ["gradient_worker", "inference",
                                                  "collector", "collector"]
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    st.assert_completed(job, timeout=200)
    ranks = check_world(tmp_path / "probe", plan)
    assert [len(gpus_of(r)) for r in ranks] == [1, 1, 0, 0], ranks
    assert ranks[0]["node"] == ranks[1]["node"], "the inference rank is not beside its learner"
    check_trained(tmp_path, "inference", job, 4)
    saved = load_checkpoint(RunDir(tmp_path / "inference").checkpoint_path)
    assert sorted(s["env_offset"] for s in saved["placement"]["collectors"]) == [0, 3]
    # the collectors run on another node of the test cluster: their exchanges are messages
    collectors_node = {r["node"] for r in ranks[2:]}
    if ranks[0]["node"] not in collectors_node:
        assert ("hpcrl: messages carry the rollouts of collector ranks 2, 3 and the acting of "
                "2, 3") in log_text(tmp_path, "inference", job)


@pytest.mark.timeout(240)
def test_shared_transport_across_nodes_is_refused_before_training(tmp_path: Path) -> None:
    """scheme.transport=shared where the collectors are on another node than their learner
    (the async template's CPU component): every rank exits 2, rank 0 naming the fix."""
    config = write_config(tmp_path, {"scheme": {"preset": "async-ppo",
                                                "collectors_per_worker": 1,
                                                "transport": "shared"}})
    rendered, script = render_job(tmp_path, "async", "straddle", config=str(config), nodes=1,
                                  gpus_per_node=1)
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    st.wait_job(job, timeout=200)
    ranks = ranks_seen(tmp_path / "probe")
    if ranks[0]["node"] == ranks[1]["node"]:
        pytest.skip("Slurm put both components on one node: nothing straddles")
    log = log_text(tmp_path, "straddle", job)
    assert "scheme.transport=shared, but its gradient worker (rank 0) is on another node" in log
    assert "scheme.transport=auto" in log and "Traceback" not in log
    assert not (tmp_path / "straddle" / "progress.csv").exists()


@pytest.mark.timeout(240)
def test_central_template_runs_a_league_job_of_two_policies(tmp_path: Path) -> None:
    """A league job of two trained policies from one config on the central template: each
    policy's job, an updater and an asynchronous gradient worker, on a block of GPU tasks,
    both in one league (the exploiter starting again after its snapshot joins, a reload of a
    job of ranks under srun). It replaced the template's CartPole job: each policy runs the
    same a3c layout."""
    config = write_config(tmp_path, {
        "scheme": {"preset": "a3c"},
        "env": {"id": "pettingzoo.classic.tictactoe_v3", "league": {"snapshot_every": 256}},
        "actor": {"action_mask": True},
        "policies": {"main": {}, "exploiter": {"role": "main_exploiter"}}})
    rendered, script = render_job(tmp_path, "central", "central", config=str(config), nodes=1,
                                  gpus_per_node=4)
    assert "4 ranks: 2 policies, each 1 updater + 1 gradient worker" in rendered.text
    plan = plan_of(config, rendered)
    assert plan["world_size"] == 4
    assert {name: ([r["role"] for r in p["ranks"]], p["world_ranks"])  # (in the file's order:
            for name, p in plan["policies"].items()} == {  # write_config sorts the keys)
        "exploiter": (["updater", "gradient_worker"], [0, 1]),
        "main": (["updater", "gradient_worker"], [2, 3])}
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    st.assert_completed(job, timeout=200)

    ranks = check_world(tmp_path / "probe", plan)
    assert all(len(gpus_of(r)) == 4 for r in ranks), ranks
    run = tmp_path / "central"
    log = log_text(tmp_path, "central", job)
    for name in ("main", "exploiter"):
        progress = rows(run / "policies" / name)
        assert int(progress[-1]["env_steps"]) >= 1024
        assert f"[{name}] hpcrl: rank 0 of 2: training ppo" in log
    assert "exploiter starts again from its initial weights after 512 env steps" in log
    names = [s.name for s in snapshots(run / "league")]
    assert [n for n in names if n.startswith("main-")] == [
        "main-256", "main-512", "main-768", "main-1024"], names
    assert [n for n in names if n.startswith("exploiter-")][:1] == ["exploiter-512"], names
    played = {(m.player, m.opponent.split("-")[0]) for m in read_matches(run / "league")}
    assert ("exploiter", "main") in played and ("main", "exploiter") in played, played


@pytest.mark.timeout(240)
def test_a_template_as_it_is_sizes_the_scheme_from_the_allocation(tmp_path: Path) -> None:
    """sbatch slurm/sync.sbatch, unrendered, with a smaller allocation on the command line."""
    config = write_config(tmp_path)
    env = {**job_env(tmp_path / "probe"), "CONFIG": str(config),
           "RUN_DIR": str(tmp_path / "raw"), "HPCRL_SET": "seed=5 train.total_env_steps=512"}
    job = st.submit(template_path("sync"), "--nodes=1", "--ntasks-per-node=2",
                    "--gpus-per-node=2", "--time=10", f"--output={tmp_path}/raw-%j.out",
                    f"--chdir={tmp_path}", env=env)
    st.assert_completed(job, timeout=200)
    ranks = ranks_seen(tmp_path / "probe")
    assert [r["size"] for r in ranks] == [2, 2]  # srun got the plugin from hpcrl slurm launcher
    assert "--mpi=pmi2 " in (tmp_path / f"raw-{job}.out").read_text()
    assert "--resume" not in ranks[0]["argv"] and str(config) in ranks[0]["argv"]
    saved = yaml.safe_load((tmp_path / "raw" / "config.yaml").read_text())
    assert saved["seed"] == 5 and saved["scheme"]["gradient_workers"] == 2
    assert saved["scheme"]["preset"] == "ddppo"
    assert int(rows(tmp_path / "raw")[-1]["env_steps"]) >= 512


def render_cli(tmp_path: Path, name: str, config: Path, *options: str) -> Path:
    """`hpcrl slurm render sync CONFIG OPTIONS --run-dir NAME -o NAME.sbatch`, typed as a user
    would (no --launch); the job logs to NAME-<job id>.out."""
    script = tmp_path / f"{name}.sbatch"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}  # the config's env wrapper is imported to check the config
    done = subprocess.run([HPCRL, "slurm", "render", "sync", str(config), *options,
                           "--run-dir", str(tmp_path / name),
                           "--log", str(tmp_path / f"{name}-%j.out"), "--job-name", f"t-{name}",
                           "-o", str(script)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return script


@pytest.mark.timeout(300)
def test_the_time_limit_warning_requeues_a_two_node_job_that_resumes_exactly(tmp_path: Path
                                                                              ) -> None:
    """The lifecycle as a user meets it: `hpcrl slurm render sync CONFIG --nodes 2
    --gpus-per-node 2 --time 2 --signal-lead 60`, sbatch, and no signal sent by hand.
    slurmctld's own warning, 30-60 s into the job, stops the first run after a checkpoint
    (the run is paced so that it cannot finish first: first_run_pace.py) and the script
    requeues the job. The test lets the restart start at once instead of after Slurm's
    2-minute requeue delay, so it comes while the step daemons of the first run are still
    being torn down on both nodes; the restart's MPI step has to keep clear of them. It
    resumes on 4 ranks over the 2 nodes and ends exactly as the uninterrupted reference run
    beside it. The job plays a self-play league on tic-tac-toe: its snapshots, the opponent of
    every match and the losses come out as in the reference, through the requeue."""
    # no straggler preemption: deterministic steps; one all-reducer for both jobs ('auto' times
    # MPI against gloo in each job, and the two sum in different orders)
    extra = {"scheme": {"preset": "ddppo", "allreduce": "mpi",
                        "preemption": {"fraction_workers": 1.0, "fraction_samples": 1.0}},
             "train": {"total_env_steps": 4096, "checkpoint_every": 1000}}  # the stop saves
    # 0.15 s per env step: 4.8 s an update, 150 s for the run, longer than its time limit
    league = {"id": "pettingzoo.classic.tictactoe_v3", "league": {"snapshot_every": 512}}
    extra["actor"] = {"action_mask": True}
    paced = write_config(tmp_path, {**extra, "env": {
        **league, "wrappers": [{PACE: {"seconds": 0.15}}]}}, name="paced.yaml")
    unpaced = write_config(tmp_path, {**extra, "env": {
        **league, "wrappers": [{PACE: {"seconds": 0.0}}]}}, name="unpaced.yaml")
    shape = ("--nodes", "2", "--gpus-per-node", "2")
    script = render_cli(tmp_path, "run", paced, *shape, "--time", "2", "--signal-lead", "60")
    ref_script = render_cli(tmp_path, "ref", unpaced, *shape, "--time", "10")
    text = script.read_text()
    assert "#SBATCH --time=2" in text and "#SBATCH --signal=B:USR1@60" in text

    def env(probe: str) -> dict[str, str]:
        job_vars = job_env(tmp_path / probe)
        job_vars["HPCRL_SETUP"] += f"; export PYTHONPATH={HERE}:${{PYTHONPATH:-}}"
        return job_vars

    job = st.submit(script, env=env("probe"))
    ref = st.submit(ref_script, env=env("ref-probe"))
    st.wait_requeued(job, restarts=1, timeout=200)  # by the warning of --signal=B:USR1@60
    st.release(job, timeout=60)
    st.assert_completed(job, timeout=150)
    st.assert_completed(ref, timeout=60)

    log = log_text(tmp_path, "run", job)
    assert log.count("hpcrl-slurm: SIGUSR1: asking every rank to checkpoint") == 1, log
    # rank 0 alone says how the run goes on: the requeue
    assert log.count("hpcrl: stopped by SIGUSR1 after a checkpoint") == 1, log[-3000:]
    assert f"now requeue job {job}, which resumes it" in log
    assert f"requeueing job {job}" in log and "restart 1:" in log
    assert "temp kvs" not in log and st.restart_count(job) == 1
    first, restarted = ranks_seen(tmp_path / "probe"), ranks_seen(tmp_path / "probe", start=1)
    for ranks in (first, restarted):
        assert [r["size"] for r in ranks] == [4] * 4, ranks
        assert len({r["node"] for r in ranks}) == 2, f"not over 2 nodes: {ranks}"
    # the restart's step follows an empty step: an id the first run's step did not have
    assert {r["step"] for r in first} == {"0"} and {r["step"] for r in restarted} == {"1"}
    assert restarted[0]["argv"] == ["train", "--resume", str(tmp_path / "run")]
    progress, reference = rows(tmp_path / "run"), rows(tmp_path / "ref")
    updates = [int(r["updates"]) for r in progress]
    assert updates == list(range(1, len(updates) + 1)), "progress.csv has a gap or a repeat"
    assert [r["env_steps"] for r in progress] == [r["env_steps"] for r in reference]
    for column in ("policy_loss", "value_loss"):  # resumed exactly where it stopped
        assert [r[column] for r in progress] == [r[column] for r in reference], column
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()

    def played(run: Path) -> list[tuple]:
        return [(m.env_seed, m.match, m.opponent, m.player_seat, m.outcome, m.length)
                for m in sorted(read_matches(run / "league"),
                                key=lambda m: (m.env_seed, m.match))]

    names = [s.name for s in snapshots(tmp_path / "run" / "league")]
    assert len(names) >= 7 and names == [s.name for s in snapshots(tmp_path / "ref" / "league")]
    assert played(tmp_path / "run") == played(tmp_path / "ref")


@pytest.mark.timeout(240)
def test_srun_with_a_plugin_that_does_not_match_stops_with_one_message(tmp_path: Path) -> None:
    """Plain srun on this cluster (MpiDefault=none) gives every task a world of size 1: task 0
    alone says so and names the plugin, instead of every task advising mpiexec."""
    config = write_config(tmp_path, {"scheme": {"preset": "ddppo"}})
    _, script = render_job(tmp_path, "sync", "lone", config=str(config), nodes=1,
                           gpus_per_node=2, launch="srun")
    job = st.submit(script, env=job_env(tmp_path / "probe"))
    assert st.wait_job(job, timeout=200) == "FAILED"
    assert {r["size"] for r in ranks_seen(tmp_path / "probe")} == {1}  # the mismatch
    log = log_text(tmp_path, "lone", job)
    assert log.count("hpcrl: Slurm started 2 tasks, but each is alone in an MPI world of "
                     "size 1") == 1, log
    assert "`srun --mpi=pmi2`" in log and "mpiexec" not in log
    # it spoke before the step ended (on whichever node Slurm gave the job)
    assert re.search(r"node\d: task 0: Exited with exit code 2", log), log
    assert not (tmp_path / "lone" / "progress.csv").exists()
