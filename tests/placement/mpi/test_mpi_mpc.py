"""MPC on collector ranks under a real mpiexec: the learner rank trains the world model from
the collectors' streams, and the collectors plan with each newer model they receive."""
import numpy as np
import pytest
import torch
from mpirun import FAST, ROOT, column, run

from hpcrl.models.model_based.acting import plan_generator
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

# the recipe's model and planner made smaller: about 15 ms of CPU an env step, not 70
SMALL = ["algo.mpc.ensemble_size=3", "actor.hidden_sizes=[32,32]", "algo.mpc.candidates=100",
         "algo.mpc.horizon=15", "replay.gradient_steps=4"]


@pytest.mark.timeout(240)
def test_collector_ranks_plan_with_the_model_the_learner_rank_trains(tmp_path):
    """The recipe (its planner, CEM) on async-sac's layout (a learner rank, two collector
    ranks) as docs/algorithms.md gives it, with chunks of 50 steps (a newer model every
    quarter episode); its model and planner made smaller, as in tests/algorithms/test_mpc.py. One
    planner is enough here: the planners differ only inside a collector's step, which
    tests/algorithms/test_mpc.py learns with for each, and the ranks carry the same model and plan
    state whichever plans."""
    run_dir = tmp_path / "mpc"
    done = run(3, ["train", str(ROOT / "examples" / "mpc-pendulum.yaml"), "--run-dir",
                   str(run_dir)],
               FAST + SMALL + ["scheme.preset=async-sac", "algo.num_steps=50",
                               "train.total_env_steps=1200"],
               timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = load_checkpoint(RunDir(run_dir).checkpoint_path)
    learner = saved["placement"]["updater"]["learner"]
    assert learner["algorithm"]["steps"] > 3000  # 4 gradient steps per env step, held to it
    for collector in saved["placement"]["collectors"]:  # both planned: their envs' noise
        fresh = plan_generator(saved["policy"]["config"]["seed"], collector["env_offset"])
        assert not torch.equal(collector["plans"]["generators"][0], fresh.get_state())
    # the episodes the collectors played improve as the learner's model does: the first
    # ones, half random (the job's first 200 steps), score about -1000
    returns = [r for r in column(run_dir, "episode_return_mean") if not np.isnan(r)]
    assert returns[-1] > returns[0] + 200, returns
