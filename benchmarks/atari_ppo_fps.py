"""Atari PPO throughput: hpcrl's recipe against a CleanRL-style single-file PPO and against
Stable-Baselines3's PPO, with the same hyperparameters and preprocessing, one process each.

All three play ``PongNoFrameskip-v4`` (the id CleanRL's ``ppo_atari.py`` uses) through the
standard chain (30 no-op starts, frame skip 4 with max-pooling, life loss ends training
episodes, fire on reset, 84x84 grayscale, 4 stacked frames, clipped rewards) and learn with
``examples/atari-ppo.yaml``'s settings: 8 envs x 128 steps, 4 epochs of 4 minibatches,
Nature CNN shared by policy and value, Adam lr 2.5e-4 (eps 1e-5), clip 0.1, entropy 0.01.
Each job runs in its own process with one torch thread; the figure is env steps per second
of training (start-up excluded), and the whole process's wall-clock is printed beside it.
hpcrl runs twice: as the others compute (float32), and with ``actor.compute_dtype=bfloat16``
(its Nature CNN under autocast; everything else float32), which the others do not offer.

    pip install -e '.[atari,bench]'
    python benchmarks/atari_ppo_fps.py [--steps 8192] [--rounds 1]
    python benchmarks/atari_ppo_fps.py --scaling   # hpcrl: 1 process, then a2c and impala
                                                  # with 2 collector ranks (3 ranks)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from machine import machine_line
from measure_process import run_measured
from mpi_scaling import mpiexec, progress_rows, steps_per_second

ENV_ID = "PongNoFrameskip-v4"
BF16 = "hpcrl bfloat16"  # the same recipe with actor.compute_dtype=bfloat16
ROOT = Path(__file__).resolve().parents[1]

# The CleanRL-style job: PPO written out in one loop over a gymnasium vector env, the way
# CleanRL's ppo_atari.py is organised (not its code). argv: steps.
CLEANRL_JOB = rf"""
import json, sys, time
import gymnasium as gym, numpy as np, torch
from torch import nn
import ale_py
from stable_baselines3.common.atari_wrappers import AtariWrapper
gym.register_envs(ale_py)
torch.set_num_threads(1)
steps, n_envs, n_steps = int(sys.argv[1]), 8, 128
def make():
    frames = gym.wrappers.ReshapeObservation(AtariWrapper(gym.make("{ENV_ID}")), (84, 84))
    return gym.wrappers.FrameStackObservation(frames, 4)
envs = gym.vector.SyncVectorEnv([make for _ in range(n_envs)])
def layer(m, gain):
    nn.init.orthogonal_(m.weight, gain); nn.init.zeros_(m.bias); return m
class Agent(nn.Module):
    def __init__(self, actions):
        super().__init__()
        g = 2 ** 0.5
        self.torso = nn.Sequential(layer(nn.Conv2d(4, 32, 8, 4), g), nn.ReLU(),
            layer(nn.Conv2d(32, 64, 4, 2), g), nn.ReLU(), layer(nn.Conv2d(64, 64, 3, 1), g),
            nn.ReLU(), nn.Flatten(), layer(nn.Linear(3136, 512), g), nn.ReLU())
        self.pi, self.v = layer(nn.Linear(512, actions), 0.01), layer(nn.Linear(512, 1), 1)
    def forward(self, x):
        h = self.torso(x.float() / 255.0)
        return self.pi(h), self.v(h).squeeze(-1)
agent = Agent(envs.single_action_space.n)
opt = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
obs_buf = torch.zeros((n_steps, n_envs, 4, 84, 84), dtype=torch.uint8)
act_buf = torch.zeros((n_steps, n_envs), dtype=torch.long)
logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((n_steps, n_envs)) for _ in range(4))
obs, _ = envs.reset(seed=0)
obs, done = torch.as_tensor(obs), torch.zeros(n_envs)
updates = steps // (n_envs * n_steps)
t0 = time.perf_counter()
for update in range(updates):
    for g in opt.param_groups:
        g["lr"] = 2.5e-4 * (1 - update / updates)
    for t in range(n_steps):
        obs_buf[t], done_buf[t] = obs, done
        with torch.no_grad():
            logits, value = agent(obs)
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
        act_buf[t], logp_buf[t], val_buf[t] = action, dist.log_prob(action), value
        o, r, term, trunc, _ = envs.step(action.numpy())
        rew_buf[t] = torch.as_tensor(r, dtype=torch.float32)
        obs, done = torch.as_tensor(o), torch.as_tensor(term | trunc, dtype=torch.float32)
    with torch.no_grad():
        next_value = agent(obs)[1]
        adv, last = torch.zeros_like(rew_buf), 0
        for t in reversed(range(n_steps)):
            nonterminal = 1.0 - (done if t == n_steps - 1 else done_buf[t + 1])
            nv = next_value if t == n_steps - 1 else val_buf[t + 1]
            delta = rew_buf[t] + 0.99 * nv * nonterminal - val_buf[t]
            last = delta + 0.99 * 0.95 * nonterminal * last
            adv[t] = last
        ret = adv + val_buf
    b_obs, b_act = obs_buf.reshape(-1, 4, 84, 84), act_buf.reshape(-1)
    b_logp, b_adv, b_ret, b_val = (x.reshape(-1) for x in (logp_buf, adv, ret, val_buf))
    for epoch in range(4):
        for idx in torch.randperm(n_envs * n_steps).split(256):
            logits, value = agent(b_obs[idx])
            dist = torch.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
            a = b_adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg = torch.max(-a * ratio, -a * ratio.clamp(0.9, 1.1)).mean()
            v_clip = b_val[idx] + (value - b_val[idx]).clamp(-0.1, 0.1)
            v_loss = 0.5 * torch.max((value - b_ret[idx]) ** 2, (v_clip - b_ret[idx]) ** 2).mean()
            loss = pg - 0.01 * dist.entropy().mean() + 0.5 * v_loss
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            opt.step()
train_s = time.perf_counter() - t0
print(json.dumps({{"train_s": train_s, "env_steps": updates * n_envs * n_steps}}))
"""

SB3_JOB = rf"""
import json, sys, time
import ale_py, gymnasium as gym, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack
gym.register_envs(ale_py)
torch.set_num_threads(1)
steps = int(sys.argv[1])
env = VecFrameStack(make_atari_env("{ENV_ID}", n_envs=8, seed=0), n_stack=4)
lin = lambda v: (lambda remaining: remaining * v)
model = PPO("CnnPolicy", env, n_steps=128, batch_size=256, n_epochs=4, learning_rate=lin(2.5e-4),
            clip_range=0.1, clip_range_vf=0.1, ent_coef=0.01, vf_coef=0.5, gamma=0.99,
            gae_lambda=0.95, max_grad_norm=0.5, seed=0, device="cpu", verbose=0,
            policy_kwargs={{"optimizer_kwargs": {{"eps": 1e-5}}}})
t0 = time.perf_counter()
model.learn(steps)
print(json.dumps({{"train_s": time.perf_counter() - t0, "env_steps": steps}}))
"""


def hpcrl_job(steps: int, env: dict[str, str], ranks: int, preset: str,
              recipe: str = "atari-ppo.yaml", sets: tuple[str, ...] = ()) -> dict[str, float]:
    """An Atari recipe of ``examples/`` on the same id and budget (``ranks`` > 1: under
    mpiexec with ``scheme.preset=preset``), with the config keys ``sets`` on top."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cmd = [str(Path(sys.executable).with_name("hpcrl")), "train",
               str(ROOT / "examples" / recipe), "--run-dir", str(run),
               "--set", f"env.id={ENV_ID}", "--set", f"train.total_env_steps={steps}",
               "--set", "train.eval_episodes=0", "--set", "train.tensorboard=false"]
        cmd += [arg for key in sets for arg in ("--set", key)]
        if ranks > 1:
            cmd = [mpiexec(), "-n", str(ranks)] + cmd + ["--set", f"scheme.preset={preset}"]
        wall, rss, _ = run_measured(cmd, env)
        fps = steps_per_second(progress_rows(run))
    return {"wall_s": wall, "rss_mb": rss, "fps": fps}


def script_job(source: str, steps: int, env: dict[str, str]) -> dict[str, float]:
    wall, rss, out = run_measured([sys.executable, "-c", source, str(steps)], env)
    result = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "rss_mb": rss, "fps": result["env_steps"] / result["train_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--scaling", action="store_true",
                        help="hpcrl alone: one process, then the a2c preset (this recipe) and "
                             "the impala preset (examples/atari-impala.yaml) on 3 ranks: one "
                             "learner, two collector ranks of 8 envs each")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    jobs = {"hpcrl": lambda: hpcrl_job(args.steps, env, 1, "")}
    if args.scaling:
        jobs["hpcrl a2c, 3 ranks"] = lambda: hpcrl_job(2 * args.steps, env, 3, "a2c")
        jobs["hpcrl impala, 3 ranks"] = lambda: hpcrl_job(2 * args.steps, env, 3, "impala",
                                                          "atari-impala.yaml")
    else:
        jobs[BF16] = lambda: hpcrl_job(args.steps, env, 1, "",
                                       sets=("actor.compute_dtype=bfloat16",))
        jobs["cleanrl-style"] = lambda: script_job(CLEANRL_JOB, args.steps, env)
        jobs["sb3"] = lambda: script_job(SB3_JOB, args.steps, env)
    print(f"PPO on {ENV_ID}, {args.steps} env steps per collecting process, 8 envs x 128 "
          f"steps, 4 epochs x 4 minibatches, Nature CNN, one torch thread per process")
    print(f"{'round':>5} {'job':>24} {'env steps/s':>12} {'wall s':>8} {'peak MB':>8}")
    fps: dict[str, list[float]] = {name: [] for name in jobs}
    for r in range(args.rounds):
        for name, job in jobs.items():
            result = job()
            fps[name].append(result["fps"])
            print(f"{r:>5} {name:>24} {result['fps']:12.1f} {result['wall_s']:8.1f} "
                  f"{result['rss_mb']:8.0f}", flush=True)
    mean = {name: sum(v) / len(v) for name, v in fps.items()}
    for name in mean:
        if name != "hpcrl":
            print(f"{name} / hpcrl = {mean[name] / mean['hpcrl']:.2f}x")
    if not args.scaling:
        best = max((n for n in mean if not n.startswith("hpcrl")), key=mean.get)
        for ours in ("hpcrl", BF16):
            print(f"{ours} / fastest other ({best}) = {mean[ours] / mean[best]:.2f}x "
                  f"(goal >= 1.5x)")


if __name__ == "__main__":
    main()
