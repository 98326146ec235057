"""Pixel agents on MPI: a convolutional encoder keeps layout equivalence, and the presets
carry image observations as their integer dtype (MinAtar bool planes, Atari uint8 frames)."""

import pytest
import torch
from mpirun import ROUNDING_SAFE_ADAM, column, shared_dir, train

from hpcrl.config import from_dict
from hpcrl.numerics.flat import params_to_flat
from hpcrl.placement.job_run import train_mpi
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

MINATAR = ["env.id=MinAtar/Breakout-v1", "actor.encoder=impala_resnet", "actor.features=64",
           "actor.hidden_sizes=[]"]
COMMON = ["train.tensorboard=false", "train.eval_episodes=0", "algo.ppo.num_epochs=2",
          "algo.num_steps=16", "algo.ppo.minibatch_size=64", "train.total_env_steps=384",
          "train.checkpoint_every=100", ROUNDING_SAFE_ADAM]


AGENTS = {"resnet": [],
          "fixup-resnet-gru": ["actor.memory=gru", "actor.memory_size=32",
                               "actor.encoder_init=fixup"]}


@pytest.mark.timeout(360)  # 180 for each agent, as when each was a test
@pytest.mark.parallel(2)
def test_two_gradient_ranks_with_a_resnet_reach_the_weights_of_one():
    """A ResNet, then the showcase's actor (Fixup ResNet + GRU: the GRU's state carried
    across rollouts and stored at each sequence's start, sequences drawn over the global
    envs), in one launch of 2 ranks: the replicas stay bit-identical and reach the weights
    of one serial run."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    weights = {}
    for name, agent in AGENTS.items():
        sets = COMMON + MINATAR + agent + ["scheme.preset=ddppo", "env.num_envs=4",
                                           "scheme.allreduce=mpi"]
        role = train_mpi(from_dict({}, sets), run_dir / f"mpi-{name}").ranked
        weights[name] = mine = params_to_flat(role.actor)
        everyone = comm.allgather(mine)
        assert all(torch.equal(everyone[0], w) for w in everyone), name
    # the serial runs after both jobs: a rank waiting in MPI for rank 0's serial run would
    # spin a core the while
    if comm.rank == 0:
        for name, agent in AGENTS.items():
            trainer = Trainer(from_dict({}, COMMON + MINATAR + agent + ["env.num_envs=8"]),
                              RunDir(run_dir / f"serial-{name}"), console=None)
            trainer.train()
            reference = params_to_flat(trainer.actor)
            torch.testing.assert_close(weights[name], reference, rtol=1e-4, atol=1e-6,
                                       msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("preset,ranks", [("impala", 3), ("a3c", 3)])
def test_on_policy_presets_train_on_bool_planes(preset, ranks, tmp_path):
    ppo = [] if preset == "impala" else ["algo.ppo.minibatch_size=64", "algo.ppo.num_epochs=2"]
    # 1024 steps: 4 (impala) or 8 (a3c) updates of bool planes sent, trained on and saved
    train(ranks, tmp_path, MINATAR + ppo + [f"scheme.preset={preset}", "env.num_envs=4",
                                            "train.total_env_steps=1024"], timeout=200)
    assert column(tmp_path, "env_steps")[-1] >= 1024
    saved = load_checkpoint(RunDir(tmp_path).checkpoint_path)
    assert saved["policy"]["obs_format"]["dtype"] == "bool"


@pytest.mark.timeout(240)
def test_apex_on_atari_keeps_each_frame_once_across_ranks(tmp_path):
    """Ape-X with collector ranks on Pong: uint8 frame stacks travel, and the learner's
    replay holds each frame once (the checkpoint's frames, far fewer than 8 per row). The
    learner samples frame stacks from it over the last 2 of 6 rows (a CNN's gradient steps
    are dear on CPU: storage, not learning)."""
    train(3, tmp_path, ["env.id=ALE/Pong-v5", "env.preset=atari", "scheme.preset=apex",
                        "env.num_envs=1", "actor.encoder=nature_cnn", "actor.features=64",
                        "actor.hidden_sizes=[]", "algo.num_steps=128",
                        "replay.buffer_size=4096", "replay.learning_starts=1024",
                        "replay.batch_size=16", "train.total_env_steps=1536"], timeout=220)
    replay = load_checkpoint(RunDir(tmp_path).checkpoint_path)[
        "placement"]["updater"]["learner"]["replay"]
    rows = int(replay["size"])
    assert rows >= 1024 and replay["frames"].dtype == torch.uint8
    assert len(replay["frames"]) < 1.5 * rows  # 8 planes a row stored whole would be 8x
