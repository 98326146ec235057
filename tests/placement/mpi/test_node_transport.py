"""Shared memory within a node (scheme.transport) and compressed messages (scheme.compress):
the window itself, the same weights as plain and lz4 messages give, every rollout and chunk
arriving, and the refusals and fall-backs."""
import numpy as np
import pytest
import torch
from mpirun import FAST, run, shared_dir

from hpcrl.comm.node_memory import NodeMemory, node_peers
from hpcrl.config import from_dict
from hpcrl.exchange.acting_slots import MessageServerSlot, MessageSlot, SharedServerSlot, SharedSlot
from hpcrl.numerics.flat import params_to_flat
from hpcrl.placement.job_run import train_mpi
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

SYNC = [*FAST, "scheme.preset=a2c", "env.num_envs=4", "algo.num_steps=16",
        "algo.ppo.minibatch_size=32", "algo.ppo.num_epochs=2", "train.total_env_steps=2048",
        "train.checkpoint_every=100"]


def world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def a_region_written_on_one_rank_is_read_in_place_on_the_other(comm) -> None:
    peers = node_peers(comm)
    assert peers.ranks == (0, 1)
    memory = NodeMemory(peers, comm.rank, {"a": 10, "b": 5000} if comm.rank == 1 else {})
    a, b = memory.region(1, "a"), memory.region(1, "b")
    assert (a.nbytes, b.nbytes) == (10, 5000)
    assert memory.region(0, "a") is None and memory.region(1, "c") is None
    # every region on a page of its own, within its owner's part
    assert (b.__array_interface__["data"][0] - a.__array_interface__["data"][0]) % 4096 == 0
    notice = np.zeros(1, np.int64)
    if comm.rank == 1:
        b[:] = np.arange(5000) % 251
        memory.fence()
        comm.Send(notice, dest=0, tag=1)
        comm.Recv(notice, source=0, tag=2)
        memory.fence()
        assert int(a[3]) == 7  # and back: the reader's store seen by the owner
    else:
        comm.Recv(notice, source=1, tag=1)
        memory.fence()
        assert np.array_equal(b, np.arange(5000) % 251)
        a[3] = 7
        memory.fence()
        comm.Send(notice, dest=1, tag=2)
    memory.close()


def module(ranked):
    """The module a rank acts or learns with: a collector's ``module``, another's ``actor``."""
    return ranked.module if hasattr(ranked, "module") else ranked.actor


def trained(sets, run_dir):
    done = train_mpi(from_dict({}, sets), run_dir)
    return done, params_to_flat(module(done.ranked))


def shared_memory_gives_the_weights_of_messages(comm, run_dir, inference: int) -> None:
    """The a2c job of 4 ranks (the worker and 3 collectors, or the worker, an inference rank
    and 2 collectors) through shared memory, plain messages and lz4-compressed messages: the
    same weights, bit for bit, and each transport's buffers where it says. With the inference
    rank (2 env groups a collector, batched as they come) the shared run is run twice, and
    it is also test_inference_ranks.py's job whose collectors take the normalisers, never
    the parameters (one launch checks both)."""
    sets = SYNC + [f"scheme.collectors_per_worker={3 - inference}",
                   f"algo.ppo.minibatch_size={24 if inference == 0 else 32}",
                   f"scheme.inference_ranks={inference}", "env.normalize_obs=true"]
    shared, shared_weights = trained(sets, run_dir / "shared")
    messages, message_weights = trained(sets + ["scheme.transport=messages"], run_dir / "msg")
    # and lz4-compressed messages (rollouts and weights): lossless, so the same bits again
    _, lz4_weights = trained(sets + ["scheme.transport=messages", "scheme.compress=lz4"],
                             run_dir / "lz4")
    # run to run: which groups' requests an inference rank finds ready changes with timing,
    # and a deterministic job's forwards do not depend on it
    again_weights = trained(sets, run_dir / "again")[1] if inference else shared_weights
    role = shared.job.role.role
    if role == "collector":
        assert shared.ranked.stream.shared and not messages.ranked.stream.shared
        if inference:  # a slot per group of envs, in the window or as messages
            assert all(isinstance(e, SharedSlot) for e in shared.ranked.link.ends)
            assert all(isinstance(e, MessageSlot) for e in messages.ranked.link.ends)
            # acting on the inference rank: no parameters ever arrived, the normaliser did,
            # every update
            assert not shared.ranked.weights.params.any()
            assert float(module(shared.ranked).obs_rms.count) > 1000
            assert shared.ranked.collector.weights_version > 0
    if role == "inference":
        assert all(isinstance(e, SharedServerSlot) for e in shared.ranked.ends)
        assert all(isinstance(e, MessageServerSlot) for e in messages.ranked.ends)
        assert shared.ranked.rows == messages.ranked.rows == 2048
        # every env step of both collectors (2 x 4 envs, 2048 steps) was acted on there, in
        # forwards that batched both collectors' envs together at least some of the time
        assert shared.ranked.batches < shared.ranked.rows // shared.ranked.envs
    if role == "gradient_worker":
        assert all(s.memory is not None for s in shared.ranked.updates.source.streams)
        assert all(s.memory is None for s in messages.ranked.updates.source.streams)
        # the weights the learner trained: the same rollouts, bit for bit, also where an
        # inference rank batched whichever groups' requests had arrived
        for weights in (shared_weights, lz4_weights, again_weights):
            assert torch.equal(weights, message_weights)
    assert shared.job.memory is not None and messages.job.memory is None


# One launch of 4 ranks for both layouts (and the inference-rank collectors' normalisers):
# each launch costs every rank an interpreter and a torch import, about 2.5 CPU seconds
@pytest.mark.timeout(520)  # 200 for each layout, 120 for the normalisers' former own test
@pytest.mark.parallel(4)
def test_shared_memory_gives_the_weights_of_messages_with_and_without_an_inference_rank():
    comm = world()
    run_dir = shared_dir(comm)
    for inference in (0, 1):
        shared_memory_gives_the_weights_of_messages(comm, run_dir / f"inference-{inference}",
                                                    inference)


def every_streamed_rollout_and_chunk_arrives(comm, run_dir, preset: str,
                                             transport: str) -> None:
    """Each collector's count of sent buffers is what its learner received, all through
    the window, or all as lz4-compressed messages."""
    sets = [*FAST, f"scheme.preset={preset}", "env.num_envs=2", "train.checkpoint_every=4"]
    if transport != "shared":
        sets += ["scheme.transport=messages", "scheme.compress=lz4"]
    if preset == "apex":
        sets += ["algo.num_steps=32", "replay.learning_starts=64", "replay.batch_size=16",
                 "train.total_env_steps=2048"]
    else:
        sets += ["algo.num_steps=16", "train.total_env_steps=1024"]
    done = train_mpi(from_dict({}, sets), run_dir / f"{preset}-{transport}")
    role = done.job.role.role
    sent = done.ranked.sent if role == "collector" else -1
    everyone = comm.allgather(sent)
    if role == "collector":
        assert done.ranked.stream.shared == (transport == "shared") and sent > 0
        assert done.ranked.stream.codec.name == ("none" if transport == "shared" else "lz4")
    else:
        updates = done.ranked.updates
        inbox = updates.inbox if preset == "apex" else updates.source.inbox
        assert all((s.memory is not None) == (transport == "shared") for s in inbox.streams)
        assert inbox.received == [everyone[r] for r in inbox.ranks]


def a3c_workers_take_lz4_compressed_weights(comm, run_dir) -> None:
    """The updater's weights reach asynchronous gradient workers compressed: each worker's
    last weights message, unpacked, is a version the updater published, bit for bit."""
    done = train_mpi(from_dict({}, [*FAST, "scheme.preset=a3c", "scheme.compress=lz4",
                                    "env.num_envs=2", "algo.num_steps=16",
                                    "algo.ppo.minibatch_size=32",
                                    "train.total_env_steps=1024"]), run_dir / "a3c")
    if done.job.role.role == "gradient_worker":
        assert done.ranked.updates.route.params.codec.name == "lz4"
        received = done.ranked.updates.route.weights  # the last message, unpacked
        assert received.version > 0 and np.isfinite(received.params).all()
        assert received.params.any()


@pytest.mark.timeout(920)  # 200 for each of the four jobs, 120 for A3C's, as when tests
@pytest.mark.parallel(3)
def test_streams_and_a3c_weights_arrive_by_shared_memory_and_lz4_messages():
    """Asynchronous collectors (IMPALA's rollouts, Ape-X's transition chunks, whose sends
    a replay learner holds back), through the window and as lz4-compressed messages, and
    A3C's weights as lz4-compressed messages: five jobs in one launch of 3 ranks, rather
    than a launch each (2.5 CPU seconds a rank)."""
    comm = world()
    run_dir = shared_dir(comm)
    for preset in ("impala", "apex"):
        for transport in ("shared", "lz4-messages"):
            every_streamed_rollout_and_chunk_arrives(comm, run_dir, preset, transport)
    a3c_workers_take_lz4_compressed_weights(comm, run_dir)


# The window itself and its refusal, in one launch of 2 ranks (2.5 CPU seconds a rank)
@pytest.mark.timeout(180)  # 60 for the region, 120 for the jobs, as when each was a test
@pytest.mark.parallel(2)
def test_a_region_is_read_in_place_and_too_little_dev_shm_falls_back_or_is_refused(
        monkeypatch, capsys):
    import hpcrl.exchange.node_transport as transport

    comm = world()
    a_region_written_on_one_rank_is_read_in_place_on_the_other(comm)
    run_dir = shared_dir(comm)
    monkeypatch.setattr(transport, "shm_free_bytes", lambda: 0)  # a full /dev/shm
    sets = [*FAST, "scheme.preset=a2c", "scheme.collectors_per_worker=1", "env.num_envs=2",
            "algo.num_steps=16", "algo.ppo.minibatch_size=32", "train.total_env_steps=256"]
    done = train_mpi(from_dict({}, sets), run_dir / "auto")
    err = capsys.readouterr().err
    if comm.rank == 0:
        assert "/dev/shm" in err and "as messages" in err, err
    assert done.job.memory.region(1, "stream") is None  # no region on this node
    if done.job.role.role == "collector":
        assert not done.ranked.stream.shared
    with pytest.raises(SystemExit) as refused:
        train_mpi(from_dict({}, sets + ["scheme.transport=shared"]), run_dir / "shared")
    assert refused.value.code == 2
    err = capsys.readouterr().err
    if comm.rank == 0:
        assert "scheme.transport=shared" in err and "/dev/shm" in err and "--shm-size" in err
        assert "Traceback" not in err


@pytest.mark.timeout(150)
@pytest.mark.parametrize("extra", [[], ["scheme.compress=lz4"]], ids=["plain", "lz4"])
def test_the_default_a2c_job_says_its_rollouts_go_through_shared_memory(tmp_path, extra):
    """`mpiexec -n 3 hpcrl train --set scheme.preset=a2c --set env.num_envs=4`, as a user
    types it; with lz4 asked for, it says that only the weights are compressed (no rollout is
    a message here). Its 2 collector ranks x 4 envs reach the weights of 1 x 8 in one
    process to the bit, as the README says (train.deterministic at its default): the same
    seeded job, serial and on ranks, run once with each parametrisation."""
    sets = [*FAST, "seed=4", "train.total_env_steps=2048", "train.checkpoint_every=100"]
    done = run(3, ["train", "--run-dir", str(tmp_path / "run")],
               sets + ["scheme.preset=a2c", "env.num_envs=4", *extra], timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hpcrl: shared memory carries the rollouts of collector ranks 1, 2" in done.stderr
    lz4_line = "scheme.compress=lz4 compresses the weights alone here"
    assert (lz4_line in done.stderr) == bool(extra)
    serial = Trainer(from_dict({}, sets + ["env.num_envs=8"]), RunDir(tmp_path / "serial"),
                     console=None)
    serial.train()
    ranks = load_checkpoint(RunDir(tmp_path / "run").checkpoint_path)["policy"]["state_dict"]
    assert ranks.keys() == serial.actor.state_dict().keys()
    for name, value in serial.actor.state_dict().items():
        assert torch.equal(ranks[name], value), name


@pytest.mark.timeout(60)
def test_shared_transport_without_collectors_is_refused(tmp_path):
    done = run(2, ["train", "--run-dir", str(tmp_path / "run")],
               [*FAST, "scheme.preset=ddppo", "scheme.gradient_workers=2",
                "scheme.transport=shared"], timeout=50)
    assert done.returncode != 0 and "Traceback" not in done.stderr  # before any rank started
    assert "scheme.transport=shared" in done.stderr and "collectors_per_worker" in done.stderr
