"""Memory of an Atari replay: 1M transitions of 4 stacked 84x84 uint8 frames.

Fills hpcrl's replay (shared frames, :mod:`hpcrl.buffers.replay.obs_store`) with the rows a
frame-stacking Atari env gives (8 envs interleaved, new frame each step, games of
``--episode-len`` steps, one-step targets), then prints the bytes it holds, the process's
resident memory growth, the time per row written and per batch of 32 sampled, and the
dense layout's size for the same rows (obs and next_obs whole: what a replay storing
observations as they are needs). Target: 1M transitions under 8 GB.

    python benchmarks/replay_memory.py [--rows 1000000] [--episode-len 1000]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from machine import machine_line

from hpcrl.buffers.replay.buffer import ReplayBuffer

K, H, W = 4, 84, 84
GB = 1024 ** 3


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def stream(rows: int, envs: int, episode_len: int, chunk: int, seed: int):
    """Chunks of (obs, next_obs) rows as 8 frame-stacking envs give them."""
    rng = np.random.default_rng(seed)
    palette = rng.integers(0, 255, (4096, H, W), dtype=np.uint8)  # frames drawn from here
    stacks = np.repeat(palette[:envs, None], K, axis=1)
    steps = np.zeros(envs, np.int64)
    made = 0
    while made < rows:
        n = min(chunk, rows - made)
        obs = np.empty((n, K, H, W), np.uint8)
        nxt = np.empty_like(obs)
        for i in range(n):
            e = (made + i) % envs
            if steps[e] % episode_len == 0:
                stacks[e] = palette[rng.integers(len(palette))]
            new = palette[rng.integers(len(palette))].copy()
            new[0, :8] = np.frombuffer(np.int64(made + i).tobytes(), np.uint8)  # distinct
            obs[i] = stacks[e]
            stacks[e, :-1] = stacks[e, 1:]
            stacks[e, -1] = new
            nxt[i] = stacks[e]
            steps[e] += 1
        made += n
        yield obs, nxt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--episode-len", type=int, default=1000)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    before = rss_bytes()
    replay = ReplayBuffer(args.rows, (K, H, W), (), True, 0, "uint8")
    start = time.perf_counter()
    for obs, nxt in stream(args.rows, 8, args.episode_len, 256, 0):
        n = len(obs)
        replay.add_rows(obs, np.zeros(n, np.int64), np.zeros(n, np.float32),
                        np.ones(n, np.float32), nxt)
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(200):
        replay.sample(32)
    sample_ms = (time.perf_counter() - start) / 200 * 1e3
    held = replay.nbytes()
    grown = rss_bytes() - before
    dense = 2 * args.rows * K * H * W
    print(f"rows {args.rows:,}  live frames {replay.observations.pool.live:,}  "
          f"(games of {args.episode_len} steps, 8 envs)")
    print(f"replay holds {held / GB:.2f} GB (arrays), process grew {grown / GB:.2f} GB "
          f"(with the frame index)")
    print(f"dense obs + next_obs for the same rows: {dense / GB:.1f} GB "
          f"({dense / held:.1f}x the shared frames)")
    print(f"write {write_s / args.rows * 1e6:.1f} us/row, sample 32 rows {sample_ms:.2f} ms")
    print(f"target: 1M transitions under 8 GB: "
          f"{'met' if grown < 8 * GB * args.rows / 1_000_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
