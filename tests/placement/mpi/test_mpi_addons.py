"""The policy-loss add-ons (algo.addons) under a real mpiexec: on two DD-PPO ranks, whose
gradient workers compute the terms on their halves of each minibatch, KL attraction,
repulsion and both predictors reach the weights of one process holding every env; and they
train on a central updater fed asynchronous gradients (a3c) and on IMPALA's asynchronous
collectors, where the updater, which never computes a loss, records their columns."""
import pytest
import torch
from mpirun import column, shared_dir, train
from test_mpi_equivalence import two_ranks_then_one

from hpcrl.config import from_dict
from hpcrl.numerics.flat import params_to_flat
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

PREDICTORS = ["algo.addons.reward_predictor_coef=0.5", "algo.addons.return_predictor_coef=0.5"]


def other_policy(run_dir):
    """A PPO policy after two updates on CartPole (seed 1): the one to attract or repel."""
    Trainer(from_dict({}, ["seed=1", "train.total_env_steps=512", "train.eval_episodes=0",
                           "train.tensorboard=false"]), RunDir(run_dir), console=None).train()
    return run_dir


def addons(other):
    return [f"algo.addons.kl_policies=[{{policy: {other}, mode: attract, coef: 0.5}}, "
            f"{{policy: {other}, mode: repel, coef: 0.2, max_kl: 0.3, name: away}}]",
            *PREDICTORS]


@pytest.mark.timeout(150)
@pytest.mark.parallel(2)
def test_two_ddppo_ranks_with_add_ons_reach_the_weights_of_one():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    other = shared_dir(comm) / "other"
    if comm.rank == 0:
        other_policy(other)
    comm.barrier()
    role, mine, trainer = two_ranks_then_one(comm, addons(other))
    if comm.rank == 0:
        torch.testing.assert_close(mine, params_to_flat(trainer.actor),
                                   rtol=1e-4, atol=1e-6)
        stats = role.algorithm.stat_names
        assert {"kl_attract_0", "kl_away", "return_prediction"} <= set(stats)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("n,sets", [
    (3, ["scheme.preset=a3c", "train.total_env_steps=12000"]),
    (3, ["scheme.preset=impala", "algo.num_steps=8", "algo.lr=7e-4", "algo.optimizer=rmsprop",
         "algo.lr_schedule=constant", "train.total_env_steps=16000"]),
], ids=["a3c", "impala"])
def test_add_ons_train_on_asynchronous_schemes(tmp_path, n, sets):
    other = other_policy(tmp_path / "other")
    train(n, tmp_path / "run", sets + PREDICTORS + [
        f"algo.addons.kl_policies=[{{policy: {other}, mode: attract}}]"])
    attract = column(tmp_path / "run", "kl_attract_0")
    assert sum(attract[-3:]) / 3 < 0.1, attract  # a trained policy's, unattracted: 0.15-0.3
    loss = column(tmp_path / "run", "reward_predictor_loss")
    assert sum(loss[-3:]) < 0.1 * sum(loss[:3]), loss  # CartPole's reward (1 a step) learnt
