"""RND and PPO+D under a real mpiexec: two DD-PPO RND ranks reach the weights of one process
holding every env (the intrinsic statistics summed over the ranks), and both recipes solve
their corridor on every kind of scheme: collectors, a central updater with asynchronous
gradients, asynchronous collection acting on an inference rank."""
import json
from pathlib import Path

import pytest
import torch
from mpirun import FAST, ROOT, ROUNDING_SAFE_ADAM, rows, run, shared_dir

from hpcrl.config import from_dict
from hpcrl.numerics.flat import params_to_flat
from hpcrl.placement.job_run import train_mpi
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

RECIPES = {"rnd": str(ROOT / "examples" / "ppo-rnd.yaml"),
           "demos": str(ROOT / "examples" / "ppo-demos.yaml")}
EXACT = ["train.tensorboard=false", "train.eval_episodes=0", "algo.ppo.num_epochs=4",
         "algo.ppo.minibatch_size=64", "train.total_env_steps=1536", "train.checkpoint_every=100",
         "algo.num_steps=32", ROUNDING_SAFE_ADAM, "rnd.enabled=true",
         "env.id=hpcrl.tasks:Corridor-v0"]


@pytest.mark.timeout(120)
@pytest.mark.parallel(2)
def test_two_rnd_ranks_reach_the_weights_of_one():
    """Predictor, both value heads, and RND's input and return statistics: 2 ranks x 4
    envs against 1 x 8."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    sets = EXACT + ["scheme.preset=ddppo", "env.num_envs=4", "scheme.allreduce=mpi",
                    "scheme.preemption.fraction_workers=1",
                    "scheme.preemption.fraction_samples=1"]
    role = train_mpi(from_dict({}, sets), run_dir / "mpi").ranked
    mine = params_to_flat(role.actor)
    if comm.rank == 0:
        trainer = Trainer(from_dict({}, EXACT + ["env.num_envs=8"]),
                          RunDir(run_dir / "serial"), console=None)
        trainer.train()
        reference = trainer.actor
        torch.testing.assert_close(mine, params_to_flat(reference), rtol=1e-4, atol=1e-6)
        for name in ("obs_rms.mean", "obs_rms.var", "obs_rms.count", "ret_rms.var",
                     "ret_rms.count"):
            ours = role.actor.rnd.state_dict()[name]
            torch.testing.assert_close(ours, reference.rnd.state_dict()[name])
        assert float(reference.rnd.obs_rms.count) == pytest.approx(1536, abs=1e-3)


def eval_return(run_dir: Path) -> float:
    return json.loads((run_dir / "eval.json").read_text())["mean_return"]


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize("recipe", ["rnd", "demos"])
@pytest.mark.parametrize("n, sets", [
    (3, ["scheme.preset=a2c"]),
    (3, ["scheme.preset=a3c"]),
    (4, ["scheme.preset=async-ppo", "scheme.inference_ranks=1"]),
], ids=["collectors", "async-gradients", "inference-rank"])
def test_the_recipes_walk_the_corridor_on_every_kind_of_scheme(tmp_path, n, sets, recipe):
    """The recipe as it is (run from the checkout, where its demonstration file lies), the
    scheme on top: every evaluation episode reaches the end, which plain PPO never does in
    this budget (tests/models/test_rnd.py)."""
    done = run(n, ["train", RECIPES[recipe], "--run-dir", str(tmp_path / "run")],
               FAST + sets + ["train.eval_episodes=5"], timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert eval_return(tmp_path / "run") == pytest.approx(1.0)
    if recipe == "rnd":
        assert float(rows(tmp_path / "run")[-1]["rnd_loss"]) > 0
