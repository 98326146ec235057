"""Checks of how collectors step their envs and learners run: ``scheme.env_groups``,
``train.compile``."""
from __future__ import annotations

import shutil

import torch

from hpcrl.sections.schema import Config


def check_env_groups(c: Config) -> str | None:
    """``scheme.env_groups`` is 0 (auto) or a divisor of ``env.num_envs``, and one group is
    all PPO+D's demonstration slots run in."""
    groups, n = c.scheme.env_groups, c.env.num_envs
    if groups < 0:
        return (f"config key 'scheme.env_groups' must be >= 0 (0: auto, 1: no groups), got "
                f"{groups}")
    if groups > 1 and n % groups:
        fits = [g for g in range(1, n + 1) if n % g == 0 and g <= 8]
        return (f"config key 'scheme.env_groups' ({groups}) must divide env.num_envs ({n}): "
                f"every group holds as many envs; use one of {', '.join(map(str, fits))}, or "
                f"0 to let hpcrl choose")
    if groups > 1 and c.algo.ppo.demos:
        return (f"config key 'scheme.env_groups' ({groups}): PPO+D's demonstration slots "
                f"replay in one batch of envs; use scheme.env_groups=1 (or 0, which keeps "
                f"one group with algo.ppo.demos)")
    return None


def check_compile(c: Config) -> str | None:
    """``train.compile`` where it can work (a CPU learner or inference rank needs a C++
    compiler)."""
    if not c.train.compile:
        return None
    devices = [c.train.device] + ([c.scheme.inference_device]
                                  if c.scheme.inference_ranks > 0 else [])
    return compile_problem(["cpu" if d == "auto" and not _cuda() else d for d in devices])


def _cuda() -> bool:
    return torch.cuda.is_available()


def compile_problem(devices: list[str]) -> str | None:
    """Why ``train.compile`` cannot work for roles on ``devices``, or None: a CPU role needs
    a C++ compiler for inductor's kernels."""
    cpu = any(not d.startswith("cuda") for d in devices)
    if cpu and shutil.which("g++") is None and shutil.which("c++") is None:
        return ("config key 'train.compile': torch.compile builds a CPU's kernels with a C++ "
                "compiler, and none is on PATH (g++ or c++); install one (e.g. apt-get "
                "install g++) or set train.compile=false")
    return None
