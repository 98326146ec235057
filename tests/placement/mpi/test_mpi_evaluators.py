"""Evaluator ranks (scheme.evaluators) under a real mpiexec: they write eval.csv and best.pt
beside training, the learners never wait for them, and the job ends cleanly."""
import csv
import signal
from pathlib import Path

import pytest
from mpirun import FAST, rows, run, shared_dir, signal_after_rows, start_training, train

from hpcrl.config import from_dict
from hpcrl.learning.evaluation import evaluate
from hpcrl.placement.job_run import train_mpi
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir
from hpcrl.runtime.signals import EXIT_PREEMPTED
from hpcrl.trained.loading import load_policy_and_config

EVALS = ["scheme.evaluators=1", "train.eval_every=1024", "train.eval_episodes=2",
         "train.checkpoint_every=1000"]


def eval_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(RunDir(run_dir).eval_curve_path, newline="") as f:
        return list(csv.DictReader(f))


def assert_evaluated(run_dir: Path, budget: int) -> None:
    """The budget was trained, eval.csv holds rows in order (the final one last) and best.pt
    holds the best row's counters."""
    assert int(float(rows(run_dir)[-1]["env_steps"])) >= budget
    evals = eval_rows(run_dir)
    steps = [int(r["env_steps"]) for r in evals]
    assert len(steps) >= 2 and steps == sorted(steps) and len(set(steps)) == len(steps), steps
    best = load_checkpoint(RunDir(run_dir).best_path)
    top = max(evals, key=lambda r: float(r["mean_return"]))
    assert best["counters"]["env_steps"] == int(top["env_steps"])
    assert best["evaluation"]["mean_return"] == pytest.approx(float(top["mean_return"]),
                                                              rel=1e-5)
    # best.pt holds the weights that were evaluated (the evaluation is deterministic)
    actor, cfg = load_policy_and_config(run_dir, best=True)
    again = evaluate(actor, cfg.env, cfg.train.eval_episodes, cfg.seed,
                     cfg.train.eval_max_episode_steps)
    assert again["mean_return"] == pytest.approx(best["evaluation"]["mean_return"])


# 4096 steps: due points at 1024, 2048 and 3072 (the first sent at once to the idle
# evaluator, whose result rank 0 waits for at the end) and the final evaluation; the curve's
# rows, their order and best.pt are the same mechanics at any budget
BUDGET = 4096
# The layouts of 4 ranks (a learner or an updater, collectors or workers, the evaluator) as
# four jobs of one launch of 4 ranks: a launch costs each rank an interpreter and a torch
# import, about 2.5 CPU seconds
FOUR_RANKS = {
    "async-ppo": ["scheme.preset=async-ppo"],
    "a2c": ["scheme.preset=a2c"],
    "apex": ["scheme.preset=apex", "algo.num_steps=256", "actor.hidden_sizes=[64,64]"],
    "a3c-central-updater": ["scheme.preset=a3c"],
}


@pytest.mark.timeout(800)  # 200 for each of the four jobs, as when each was a test
@pytest.mark.parallel(4)
def test_evaluator_ranks_of_four_rank_layouts_write_the_curve_and_best():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    for name, sets in FOUR_RANKS.items():
        train_mpi(from_dict({}, FAST + EVALS + sets + [f"train.total_env_steps={BUDGET}"]),
                  run_dir / name)
    # rank 0's checks after every job: a rank waiting in MPI for them would spin a core
    if comm.rank == 0:
        for name in FOUR_RANKS:
            assert_evaluated(run_dir / name, BUDGET)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("n, sets", [
    (3, ["scheme.preset=ddppo", "scheme.gradient_workers=2"]),
    (5, ["scheme.preset=impala", "scheme.inference_ranks=1"]),
], ids=["ddppo", "impala-inference-rank"])
def test_an_evaluator_rank_writes_the_curve_and_best(tmp_path, n, sets):
    train(n, tmp_path, EVALS + sets + [f"train.total_env_steps={BUDGET}"], timeout=220)
    assert_evaluated(tmp_path, BUDGET)


@pytest.mark.timeout(240)
def test_a_slow_evaluator_never_holds_the_learners_back(tmp_path):
    # the evaluator's env sleeps 0.5 s a step: each evaluation takes 4 s (2 episodes cut at
    # 4 steps; CartPole's last at least 8), so the 7 due points of the budget, had the
    # learners waited for each, would add 28 s to the training; they take the newest weights
    # when free instead. (The job's end waits for the evaluations in flight: 2 of them, 8 s,
    # where episodes cut at 20 steps made it 40 s.)
    slow = {"HPCRL_TEST_SLOW_RANKS": "3", "HPCRL_TEST_SLOW_SECONDS": "0.5"}
    train(4, tmp_path, EVALS + ["scheme.preset=async-ppo", "train.total_env_steps=8192",
                                "env.id=hpcrl_testenvs:SlowCartPole-v0",
                                "train.eval_max_episode_steps=4"], env=slow, timeout=220)
    progress = rows(tmp_path)
    assert int(float(progress[-1]["env_steps"])) >= 8192
    evaluated = eval_rows(tmp_path)[:-1]  # (the last row: rank 0's final evaluation)
    assert len(evaluated) < 7, evaluated
    trained_s = float(progress[-1]["wall_time_s"])
    assert trained_s < 4 * max(len(evaluated), 1) + 40, trained_s


@pytest.mark.timeout(300)
def test_a_stopped_job_with_an_evaluator_ends_and_resumes_its_curve(tmp_path):
    run_dir = tmp_path / "cut"
    sets = EVALS + ["scheme.preset=async-ppo", "train.total_env_steps=16384"]
    job = start_training(4, run_dir, sets)
    signal_after_rows(job, run_dir, 10, signal.SIGUSR1, within_s=120)
    _, err = job.communicate(timeout=120)  # the evaluator leaves with every other rank
    assert job.returncode == EXIT_PREEMPTED, err[-2000:]
    saved = load_checkpoint(RunDir(run_dir).checkpoint_path)["counters"]["env_steps"]
    done = run(4, ["train", "--resume", str(run_dir)], [], timeout=150)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [int(r["env_steps"]) for r in eval_rows(run_dir)]
    assert steps == sorted(steps) and len(set(steps)) == len(steps), (saved, steps)
    assert steps[-1] >= 16384 and any(s > saved for s in steps)
