"""How fast an Atari torso learns in float32 and in bfloat16 (``actor.compute_dtype``), on
this CPU's own kernels and with every library held to AVX2 (as on a CPU without AVX-512,
whose bfloat16 torch only emulates).

One job per (dispatch, dtype), each its own process with one thread: the Nature CNN of
``examples/atari-ppo.yaml`` takes a forward and backward pass over 256 frames [4, 84, 84]
of uint8, the learner's minibatch; the median of 20 passes after 3 warm-up passes.

    python benchmarks/precision_speed.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from machine import AVX2_ONLY, machine_line

JOB = r"""
import json, statistics, sys, time, warnings
import gymnasium as gym, numpy as np, torch
from hpcrl.models.encoders import make_encoder
from hpcrl.envs.obs_format import obs_format
from hpcrl.numerics.precision import compute_dtype, native_bfloat16
torch.set_num_threads(1)
torch.manual_seed(0)
warnings.simplefilter("ignore")
space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
net = make_encoder("nature_cnn", obs_format(space), 512, compute_dtype=compute_dtype(sys.argv[1]))
frames = torch.randint(0, 256, (256, 4, 84, 84), dtype=torch.uint8)
times = []
for i in range(23):
    start = time.perf_counter()
    net(frames).square().mean().backward()
    if i >= 3:
        times.append(time.perf_counter() - start)
print(json.dumps({"ms": 1000 * statistics.median(times),
                  "native_bf16": native_bfloat16(torch.device("cpu"))}))
"""

DISPATCHES = {"native": {}, "avx2": AVX2_ONLY}


def job(dtype: str, extra: dict[str, str]) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
    done = subprocess.run([sys.executable, "-c", JOB, dtype], env=env, capture_output=True,
                          text=True, check=True, timeout=1800)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatch", nargs="+", choices=sorted(DISPATCHES),
                        default=["native", "avx2"])
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print("Nature CNN, forward + backward of 256 uint8 frames [4, 84, 84], one thread")
    for dispatch in args.dispatch:
        f32, bf16 = (job(dtype, DISPATCHES[dispatch]) for dtype in ("float32", "bfloat16"))
        print(f"{dispatch:>7}: float32 {f32['ms']:7.1f} ms, bfloat16 {bf16['ms']:7.1f} ms: "
              f"bfloat16 is {f32['ms'] / bf16['ms']:.2f}x float32's speed", flush=True)


if __name__ == "__main__":
    main()
