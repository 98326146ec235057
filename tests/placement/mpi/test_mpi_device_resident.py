"""Gradients and normaliser moments reach the all-reducer on the learner's device, with no
host round trip: the gradient handed over is the very tensor backward wrote into."""

import pytest
import torch
from device_recording import Call, RecordingAllreducer
from mpirun import shared_dir

import hpcrl.placement.wiring.gradient_routes as routes
from hpcrl.config import from_dict
from hpcrl.placement.job_run import train_mpi

UPDATES, EPOCHS, MINIBATCHES = 3, 2, 4
SETS = ["train.tensorboard=false", "train.eval_episodes=0", "scheme.preset=ddppo",
        "env.num_envs=4", "algo.num_steps=32", f"algo.ppo.num_epochs={EPOCHS}",
        "algo.ppo.minibatch_size=64", f"train.total_env_steps={UPDATES * 32 * 8}",
        "train.checkpoint_every=100", "env.normalize_obs=true"]


def check_the_allreducer_got_the_learner_device_tensors(role, calls: list[Call]) -> None:
    """Every gradient all-reduced was the tensor backward accumulated into, on the learner's
    device; the normaliser's moments went once an update, as float64, on that device too."""
    actor = role.actor
    device = next(actor.parameters()).device
    backward_buffer = actor.__dict__["_hpcrl_flat_grads"]  # what backward accumulates into

    gradients = [c for c in calls if c.op == "average"]
    assert len(gradients) == UPDATES * EPOCHS * MINIBATCHES
    numel = sum(p.numel() for p in actor.parameters())
    assert {(c.device, c.dtype, c.numel) for c in gradients} == {(device, torch.float32, numel)}
    assert {c.address for c in gradients} == {backward_buffer.data_ptr()}, \
        "the all-reducer was handed a copy of the gradient, not the tensor backward wrote"

    moments = [c for c in calls if c.op == "sum"]
    obs_dim = int(actor.obs_rms.mean.numel())
    assert len(moments) == UPDATES  # once per update, carried by its first gradient
    assert {(c.device, c.dtype, c.numel) for c in moments} == {
        (device, torch.float64, 2 * obs_dim + 4)}


@pytest.mark.timeout(240)  # 120 for each backend, as when each was a test
@pytest.mark.parallel(2)
def test_gradients_and_moments_reach_the_mpi_and_gloo_allreducers_on_the_learner_device(
        monkeypatch):
    """Both backends in one launch of 2 ranks (a launch costs each rank an interpreter and a
    torch import, about 2.5 CPU seconds: more than one of these jobs)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    run_dir = shared_dir(comm)
    calls: dict[str, list[Call]] = {"mpi": [], "gloo": []}
    backend = ["mpi"]  # the job now running: its all-reducer records into calls[backend[0]]
    real = routes.make_allreducer
    monkeypatch.setattr(routes, "make_allreducer",
                        lambda *a, **kw: RecordingAllreducer(real(*a, **kw), calls[backend[0]]))
    for allreduce in calls:
        backend[0] = allreduce
        role = train_mpi(from_dict({}, SETS + [f"scheme.allreduce={allreduce}"]),
                         run_dir / allreduce).ranked
        check_the_allreducer_got_the_learner_device_tensors(role, calls[allreduce])
