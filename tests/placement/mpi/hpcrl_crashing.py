"""Envs that fail at random, imported by env id as ``hpcrl_crashing:CrashingCartPole-v0``.

Like RLlib's ``CartPoleCrashing`` (its tuned examples crash 0.0005 a step and 0.005 a
reset), configured by ``env.kwargs``:

* ``p_crash``: probability that a step raises ``RuntimeError``;
* ``p_crash_reset``: probability that a reset raises;
* ``p_hang``: probability that a step sleeps ``hang_s`` seconds (a hung game, for
  ``env.step_timeout_s``);
* ``p_die``: probability that a step kills its process with SIGSEGV (a crashed simulator).

Each env draws from a generator seeded by its seeded reset (a fresh env is reset with a
fresh seed), so a run in one process is the same every time. Every failure is counted in the
file ``HPCRL_CRASH_LOG`` names, when set (one line a fault: kind and pid), which the tests
compare with what hpcrl counted.

``FailOnceCartPole-v0`` fails where a test says, once: the env first reset with seed
``fail_seed`` (a job's env ``i`` is reset with ``seed + i``; an env made again gets a fresh
seed, so it does not fail again) fails at its step ``fail_step`` as ``how`` says: ``raise``,
``die`` (SIGSEGV), ``hang`` (sleeps an hour), or ``reset`` (its first reset raises).
"""
from __future__ import annotations

import os
import random
import signal
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


def _log(kind: str) -> None:
    path = os.environ.get("HPCRL_CRASH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{kind} {os.getpid()}\n")


class CrashingCartPole(CartPoleEnv):
    """CartPole that fails at random (see the module's docstring)."""

    def __init__(self, p_crash: float = 0.0, p_crash_reset: float = 0.0, p_hang: float = 0.0,
                 hang_s: float = 3600.0, p_die: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.p_crash, self.p_crash_reset = p_crash, p_crash_reset
        self.p_hang, self.hang_s, self.p_die = p_hang, hang_s, p_die
        self.draws = random.Random(os.getpid())

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.draws = random.Random(seed)
        if self.draws.random() < self.p_crash_reset:
            _log("reset")
            raise RuntimeError("the env crashed in reset (injected)")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        draw = self.draws.random()
        if draw < self.p_crash:
            _log("step")
            raise RuntimeError("the env crashed in step (injected)")
        draw -= self.p_crash
        if draw < self.p_hang:
            _log("hang")
            time.sleep(self.hang_s)
        elif draw - self.p_hang < self.p_die:
            _log("die")
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().step(action)


gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole, max_episode_steps=500)


class FailOnceCartPole(CartPoleEnv):
    """CartPole that fails once, where a test says (see the module's docstring)."""

    def __init__(self, fail_seed: int = -1, fail_step: int = 0, how: str = "raise",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.fail_seed, self.fail_step, self.how = fail_seed, fail_step, how
        self.failing, self.steps = False, 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.failing = seed == self.fail_seed
            if self.failing and self.how == "reset":
                raise RuntimeError("the env failed in its first reset (injected)")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.failing and self.steps == self.fail_step:
            if self.how == "die":
                os.kill(os.getpid(), signal.SIGSEGV)
            if self.how == "hang":
                time.sleep(3600)
            raise RuntimeError(f"the env failed at its step {self.steps} (injected)")
        return super().step(action)


gym.register("FailOnceCartPole-v0", entry_point=FailOnceCartPole, max_episode_steps=500)


# -- what the crashing-env tests share ------------------------------------------------------

# (per step, per reset): a tenth of RLlib's crash rates in its crashing-env tuned examples,
# and RLlib's own
RATES = {"1e-4": (1e-4, 1e-3), "rllib": (5e-4, 5e-3)}


def crashing(rate: str) -> list[str]:
    """The keys of a job whose every env crashes at random at ``rate`` (a key of RATES)."""
    step, reset = RATES[rate]
    return ["env.id=hpcrl_crashing:CrashingCartPole-v0",
            f"env.kwargs={{p_crash: {step}, p_crash_reset: {reset}}}"]


def faults_logged(log: str) -> int:
    """How many faults the envs injected, by the ``HPCRL_CRASH_LOG`` file ``log``."""
    try:
        with open(log) as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


def restarts_counted(run_dir: str) -> tuple[int, int]:
    """(envs made again in training by progress.csv, in the final evaluation by eval.json)."""
    import csv
    import json

    with open(os.path.join(run_dir, "progress.csv")) as f:
        trained = sum(int(float(row["env_restarts"] or 0)) for row in csv.DictReader(f))
    with open(os.path.join(run_dir, "eval.json")) as f:
        evaluated = int(json.load(f).get("env_restarts", 0))
    return trained, evaluated
