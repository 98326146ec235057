"""``train.compile``: a PPO gradient step and an inference forward, eager and compiled.

For each network (CartPole's MLP, Atari's Nature CNN), on ``--device``: the seconds of one
PPO gradient step (loss, backward, Adam) on a minibatch of ``--batch`` samples, and of one
inference forward (:class:`~hpcrl.models.actor_engines.TorchEngine`) of 8 envs, eager and under
torch.compile as ``train.compile`` sets it (inductor; CUDA graphs on a GPU), with the
compilation's own time apart. Medians of ``--repeats`` after warm-up.

    python benchmarks/compile_speed.py [--device cpu|cuda] [--repeats 30]
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch
from machine import machine_line

from hpcrl.algorithms import make_algorithm
from hpcrl.buffers.rollout_storage import RolloutBatch
from hpcrl.build import env_spaces, make_actor
from hpcrl.config import from_dict
from hpcrl.models.actor_engines import TorchEngine
from hpcrl.numerics.compiling import compile_loss

NETWORKS = {
    "CartPole MLP 64x64": ["env.id=CartPole-v1"],
    "Atari Nature CNN": ["env.id=PongNoFrameskip-v4", "env.preset=atari",
                         "actor.encoder=nature_cnn"],
}


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (so a time covers it)."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def batch_of(spaces: Any, size: int, device: torch.device) -> RolloutBatch:
    """A minibatch of ``size`` random samples of the env's observations and actions."""
    shape = tuple(spaces.obs_shape)
    obs = (torch.randint(0, 255, (size, *shape), dtype=torch.uint8)
           if spaces.obs_format.dtype == "uint8" else torch.randn(size, *shape))
    n = int(spaces.action_space.n)
    return RolloutBatch(obs.to(device), torch.randint(0, n, (size,)).to(device),
                        torch.full((size,), -np.log(n)).to(device), torch.zeros(size).to(device),
                        torch.randn(size).to(device), torch.randn(size).to(device))


def timed(step: Any, repeats: int, device: torch.device) -> tuple[float, float]:
    """Seconds of the first call (compilation included) and median of the next ``repeats``."""
    start = time.perf_counter()
    step()
    synchronize(device)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def gradient_step(sets: list[str], device: torch.device, size: int, compile_: bool,
                  repeats: int) -> tuple[float, float]:
    """One PPO gradient step's seconds (first, median)."""
    cfg = from_dict({}, sets + [f"algo.ppo.minibatch_size={size}"])
    spaces = env_spaces(cfg)
    torch.manual_seed(0)
    algorithm = make_algorithm(cfg, spaces, device)
    if compile_:
        compile_loss(algorithm, device)
    batch = batch_of(spaces, size, device)

    def step() -> None:
        grads, _ = algorithm.compute_gradients(batch)
        algorithm.apply_gradients(grads)

    return timed(step, repeats, device)


def forward(sets: list[str], device: torch.device, compile_: bool,
            repeats: int) -> tuple[float, float]:
    """One inference forward's seconds (first, median) for 8 envs."""
    cfg = from_dict({}, sets)
    spaces = env_spaces(cfg)
    torch.manual_seed(0)
    engine = TorchEngine(make_actor(cfg, spaces).to(device), compile=compile_)
    shape = tuple(spaces.obs_shape)
    obs = (np.random.randint(0, 255, (8, *shape)).astype(np.uint8)
           if spaces.obs_format.dtype == "uint8" else np.random.randn(8, *shape).astype(np.float32))
    noise = np.random.rand(8).astype(np.float32)
    return timed(lambda: engine.step(obs, noise), repeats, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    print(machine_line())
    print(f"{'network':<20} {'what':<22} {'eager ms':>9} {'compiled ms':>12} {'speed-up':>9} "
          f"{'compile s':>10}")
    for name, sets in NETWORKS.items():
        for what, run in ((f"gradient step ({args.batch})",
                           lambda c, s=sets: gradient_step(s, device, args.batch, c,
                                                           args.repeats)),
                          ("forward (8 envs)",
                           lambda c, s=sets: forward(s, device, c, args.repeats))):
            _, eager = run(False)
            first, fast = run(True)
            print(f"{name:<20} {what:<22} {eager * 1e3:9.2f} {fast * 1e3:12.2f} "
                  f"{eager / fast:8.2f}x {first:10.1f}", flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
