"""Layout independence and identical replicas, inside real MPI ranks (mpi-pytest)."""
import pytest
import torch
from mpirun import FAST, ROUNDING_SAFE_ADAM, rows, shared_dir, train

from hpcrl.config import from_dict
from hpcrl.numerics.flat import params_to_flat
from hpcrl.placement.job_run import train_mpi
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

K_UPDATES = 6
COMMON = ["train.tensorboard=false", "train.eval_episodes=0", "algo.ppo.num_epochs=4",
          "algo.ppo.minibatch_size=64", f"train.total_env_steps={K_UPDATES * 32 * 8}",
          "train.checkpoint_every=100", ROUNDING_SAFE_ADAM]


DDPPO_2X4 = ["scheme.preset=ddppo", "env.num_envs=4", "scheme.allreduce=mpi",
             "scheme.preemption.fraction_workers=1", "scheme.preemption.fraction_samples=1"]


def two_ranks_then_one(comm, agent):
    """``agent`` on 2 DD-PPO ranks x 4 envs (no preemption), then, on rank 0, serially on
    8 envs: (this rank's role, its flat weights, the serial trainer on rank 0 or None)."""
    run_dir = shared_dir(comm)
    role = train_mpi(from_dict({}, COMMON + agent + DDPPO_2X4), run_dir / "mpi").ranked
    trainer = None
    if comm.rank == 0:
        trainer = Trainer(from_dict({}, COMMON + agent + ["env.num_envs=8"]),
                          RunDir(run_dir / "serial"), console=None)
        trainer.train()
    return role, params_to_flat(role.actor), trainer


# The cases below each run several jobs in one launch of 2 ranks: a launch costs every rank
# an interpreter and a torch import (about 2.5 CPU seconds), more than one of these jobs.


@pytest.mark.timeout(240)  # 120 for each backend, as when each was a test
@pytest.mark.parallel(2)
def test_two_gradient_ranks_reach_the_weights_of_one_with_mpi_and_gloo():
    """Each all-reduce backend in turn: the replicas stay bit-identical, and both reach the
    weights of one serial run holding every env (trained once, the same for both)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    weights = {}
    for allreduce in ("mpi", "gloo"):
        sets = COMMON + ["scheme.preset=ddppo", "scheme.preemption.fraction_workers=1",
                         "scheme.preemption.fraction_samples=1", "env.num_envs=4",
                         f"scheme.allreduce={allreduce}"]
        role = train_mpi(from_dict({}, sets), run_dir / allreduce).ranked
        weights[allreduce] = mine = params_to_flat(role.actor)
        everyone = comm.allgather(mine)
        assert all(torch.equal(everyone[0], w) for w in everyone), allreduce  # bit-identical
    if comm.rank == 0:
        serial = from_dict({}, COMMON + ["env.num_envs=8"])
        trainer = Trainer(serial, RunDir(run_dir / "serial"), console=None)
        trainer.train()
        reference = params_to_flat(trainer.actor)
        for allreduce, mine in weights.items():
            torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6,
                                       msg=lambda m, allreduce=allreduce: f"{allreduce}: {m}")


@pytest.mark.timeout(240)  # 120 for each env, as when each was a test
@pytest.mark.parallel(2)
def test_structured_observations_cross_ranks_in_their_dtype_and_layouts_agree():
    """Blackjack's Tuple of Discrete observations travel as int64 in the rollouts, a Dict of
    an image, a float and an integer as packed bytes; either way two gradient ranks still
    reach the weights of one process holding every env."""
    import hpcrl_testenvs  # noqa: F401  registers DictMatch
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    envs = {"Blackjack-v1": "int64", "hpcrl_testenvs:DictMatch-v0": "uint8"}
    run_dir = shared_dir(comm)
    weights = {}
    # both jobs first, then the serial runs on rank 0: a rank waiting in MPI for another
    # rank's serial run would spin a core the while
    for i, env_id in enumerate(envs):
        sets = COMMON + [f"env.id={env_id}", "scheme.preset=ddppo", "env.num_envs=4",
                         "scheme.allreduce=mpi"]
        role = train_mpi(from_dict({}, sets), run_dir / f"mpi-{i}")
        weights[env_id] = params_to_flat(getattr(role, "ranked", role).actor)
    if comm.rank == 0:
        for i, (env_id, dtype) in enumerate(envs.items()):
            serial = from_dict({}, COMMON + [f"env.id={env_id}", "env.num_envs=8"])
            trainer = Trainer(serial, RunDir(run_dir / f"serial-{i}"), console=None)
            trainer.train()
            reference = params_to_flat(trainer.actor)
            torch.testing.assert_close(weights[env_id], reference, rtol=1e-4, atol=1e-6,
                                       msg=lambda m, env_id=env_id: f"{env_id}: {m}")
            ckpt = torch.load(run_dir / f"mpi-{i}" / "checkpoints" / "last.pt",
                              weights_only=True)
            assert ckpt["policy"]["obs_format"]["dtype"] == dtype, env_id


@pytest.mark.timeout(300)  # 150 for each memory, as when each was a test
@pytest.mark.parallel(2)
def test_recurrent_layouts_agree_with_a_gru_and_an_lstm():
    """A recurrent actor on the memory task: 2 ranks x 4 envs reach the weights of 1 x 8,
    minibatches of whole sequences (16 steps, 2 per env and rollout, one per minibatch)
    drawn over the global envs, states carried across rollouts and reset at episode ends;
    a GRU, then an LSTM."""
    import hpcrl_testenvs  # noqa: F401  registers CueMemory
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    agents = {memory: ["env.id=hpcrl_testenvs:CueMemory-v0", f"actor.memory={memory}",
                       "actor.memory_size=16", "algo.ppo.minibatch_size=128"]
              for memory in ("gru", "lstm")}
    weights = {}
    for memory, agent in agents.items():  # both jobs before rank 0's serial runs, as above
        role = train_mpi(from_dict({}, COMMON + agent + DDPPO_2X4), run_dir / memory).ranked
        weights[memory] = params_to_flat(role.actor)
    if comm.rank == 0:
        for memory, agent in agents.items():
            trainer = Trainer(from_dict({}, COMMON + agent + ["env.num_envs=8"]),
                              RunDir(run_dir / f"serial-{memory}"), console=None)
            trainer.train()
            serial = trainer.config
            assert serial.algo.bptt_len == 0  # the length is chosen: 32 steps / 2 minibatches
            reference = params_to_flat(trainer.actor)
            fresh = Trainer(serial, RunDir(run_dir / f"fresh-{memory}"), console=None)
            assert not torch.equal(reference, params_to_flat(fresh.actor))
            torch.testing.assert_close(weights[memory], reference, rtol=1e-4, atol=1e-6,
                                       msg=lambda m, memory=memory: f"{memory}: {m}")


@pytest.mark.timeout(120)
@pytest.mark.parallel(2)
def test_evaluations_during_training_run_on_rank_0_of_a_job():
    """train.eval_every in a 2-rank DD-PPO job: rank 0 evaluates copies of the weights at
    the env steps of a serial run and keeps the best; the other rank writes nothing."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    role, _, trainer = two_ranks_then_one(comm, ["train.eval_every=512",
                                                 "train.eval_episodes=2"])
    if comm.rank == 0:
        import csv

        from hpcrl.runtime.checkpoint import load_checkpoint

        def curve(path):
            with open(path / "eval.csv", newline="") as f:
                return [(r["env_steps"], r["updates"], float(r["mean_return"]))
                        for r in csv.DictReader(f)]
        job, serial = curve(trainer.run.path.parent / "mpi"), curve(trainer.run.path)
        assert [r[:2] for r in job] == [r[:2] for r in serial] == [
            ("512", "2"), ("1024", "4"), ("1536", "6")]
        best = load_checkpoint(trainer.run.path.parent / "mpi" / "checkpoints" / "best.pt")
        assert best["evaluation"]["mean_return"] == max(r[2] for r in job)


# figures that depend on timing or on where the work ran, not on the maths
TIMING = {"wall_time_s", "fps", "time_collect_s", "time_wait_s", "time_compute_s",
          "time_communicate_s"}


@pytest.mark.timeout(150)
def test_serial_and_one_learner_mpi_runs_write_the_same_progress(tmp_path):
    """The serial run and a 2-rank job (one gradient worker fed by one collector rank) of
    the same config write progress.csv with the same columns and, but for timings, the same
    values: both run one learner loop and report through one definition of each figure."""
    sets = ["train.total_env_steps=2048", "env.num_envs=4", "algo.num_steps=64",
            "algo.ppo.num_epochs=2", "algo.ppo.minibatch_size=64", "train.checkpoint_every=100"]
    train(2, tmp_path / "mpi", sets + ["scheme.preset=a2c", "scheme.collectors_per_worker=1"])
    Trainer(from_dict({}, FAST + sets), RunDir(tmp_path / "serial"), console=None).train()
    serial, mpi = rows(tmp_path / "serial"), rows(tmp_path / "mpi")
    assert list(serial[0]) == list(mpi[0])
    assert len(serial) == len(mpi) == 8
    for s, m in zip(serial, mpi, strict=False):
        for name in s:
            if name in TIMING:
                continue
            assert float(s[name]) == pytest.approx(float(m[name]), rel=1e-4, abs=1e-6), name
