"""Collection throughput: hpcrl's collector against a bare Gymnasium loop.

The bare loop is the physical limit of this machine for the job as users write it: a
SyncVectorEnv of the same envs stepped with actions from the same policy network (torch
forward of policy and value, Categorical sample), with nothing stored. The envs alone,
stepped with fixed actions, bound any collector from above. The collector does everything training
needs on top (rollout buffers, log-probs, values, bootstrap values, episode statistics).

    python benchmarks/collection.py [--envs 8] [--steps 20000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from machine import machine_line

from hpcrl.build import env_spaces, make_actor, rollout_layout  # noqa: E402
from hpcrl.collection.collector import rollout_collector  # noqa: E402
from hpcrl.config import from_dict  # noqa: E402
from hpcrl.envs.vector import make_vector_env  # noqa: E402


def bare_loop(config, actor, steps: int, policy: bool = True) -> float:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(config.env.id)
                                     for _ in range(config.env.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs, _ = envs.reset(seed=0)
    vector_steps = steps // config.env.num_envs
    start = time.perf_counter()
    fixed = np.zeros(config.env.num_envs, dtype=np.int64)
    for _ in range(vector_steps):
        if policy:
            with torch.inference_mode():  # the networks' own torch layers, as users write it
                x = torch.as_tensor(obs, dtype=torch.float32)
                logits = actor.pi_head(actor.pi_trunk(x))
                _values = actor.vf_head(actor.vf_trunk(x))
                actions = torch.distributions.Categorical(logits=logits).sample().numpy()
        else:
            actions = fixed
        obs, *_ = envs.step(actions)
    elapsed = time.perf_counter() - start
    envs.close()
    return vector_steps * config.env.num_envs / elapsed


def hpcrl_collector(config, actor, steps: int) -> float:
    spaces = env_spaces(config)
    envs = make_vector_env(config.env, config.env.num_envs)
    collector = rollout_collector(envs, actor, config.env, config.algo.gamma, config.seed)
    rollout = rollout_layout(config, spaces, config.env.num_envs).new()
    per_rollout = config.algo.num_steps * config.env.num_envs
    rollouts = max(steps // per_rollout, 1)
    start = time.perf_counter()
    for _ in range(rollouts):
        collector.collect(rollout)
    elapsed = time.perf_counter() - start
    envs.close()
    return rollouts * per_rollout / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    torch.set_num_threads(1)
    config = from_dict({}, [f"env.num_envs={args.envs}",
                            f"algo.ppo.minibatch_size={args.envs * 32}"])
    actor = make_actor(config, env_spaces(config))
    bare, ours, envs_only = [], [], []
    for _ in range(args.repeats):  # interleaved, so a load spike hits all
        bare.append(bare_loop(config, actor, args.steps))
        ours.append(hpcrl_collector(config, actor, args.steps))
        envs_only.append(bare_loop(config, actor, args.steps, policy=False))
    b, o, e = (float(np.median(x)) for x in (bare, ours, envs_only))
    print(f"{config.env.id}, {args.envs} envs, 64x64 MLP actor-critic, 1 thread, "
          f"median of {args.repeats}")
    print(f"  bare gymnasium loop : {b:10,.0f} env steps/s")
    print(f"  hpcrl collector     : {o:10,.0f} env steps/s")
    print(f"  envs alone, no policy: {e:9,.0f} env steps/s (ceiling of any collector)")
    print(f"  ratio collector/bare: {o / b:10.2f}  (target >= 0.9)")
    print(f"  ratio collector/envs: {o / e:10.2f}")


if __name__ == "__main__":
    main()
