"""Plug-ins that replace an agent's compute by sleeps of calibrated length, so that tens of
ranks fit on two cores while the job machinery (ranks, roles, messages of the real sizes,
all-reduces of the real gradient, the leader, checkpoints, the failure watch) runs as is.
Imported by name (benchmarks/ on PYTHONPATH), as every hpcrl plug-in is:

- ``emulation:SleepingFrames-v0``, an env whose step sleeps ``HPCRL_EMU_STEP_S`` seconds
  and returns uint8 frames of shape ``HPCRL_EMU_OBS`` (``4,84,84``: Atari's) in 6 actions;
- ``emulation:BallastEncoder``, an encoder as cheap as a linear layer that carries
  ``params`` parameters more (the real network's count): gradients, weights and
  checkpoints have the real sizes, acting costs nothing;
- ``emulation:SleepingPPO``, ``emulation:SleepingIMPALA``, ``emulation:SleepingDQN``:
  each gradient step sleeps ``HPCRL_EMU_LOSS_S`` seconds and returns a zero loss over every
  parameter (a backward of the real size, no arithmetic worth the name), and the optimiser
  is one vector pass (:class:`PlainStep`).

benchmarks/scaling.py sets the variables from a calibration run of the real agent.
"""
from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import hpcrl

EPISODE_STEPS = 1000


def _seconds(name: str) -> float:
    return float(os.environ.get(name, "0") or 0)


class SleepingFrames(gym.Env):
    """Frames of zeros; each step sleeps ``HPCRL_EMU_STEP_S`` (an env step and the policy's
    share of acting, as measured), and an episode ends every 1,000 steps."""

    def __init__(self) -> None:
        shape = tuple(int(n) for n in os.environ.get("HPCRL_EMU_OBS", "4,84,84").split(","))
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.frame = np.zeros(shape, np.uint8)
        self.delay = _seconds("HPCRL_EMU_STEP_S")
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.steps = 0
        return self.frame, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.delay:
            time.sleep(self.delay)
        self.steps += 1
        return self.frame, 0.0, False, self.steps >= EPISODE_STEPS, {}


gym.register("SleepingFrames-v0", entry_point=SleepingFrames)


class BallastEncoder(nn.Module):
    """A linear layer of one element of each frame to ``features`` units, plus ``params`` parameters
    that only the gradient sees (each backward fills their gradient with zeros)."""

    def __init__(self, observation_space: gym.Space, features: int = 16, params: int = 0
                 ) -> None:
        super().__init__()
        self.features = features
        self.layer = nn.Linear(1, features)
        self.ballast = nn.Parameter(torch.zeros(max(params, 1)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # one element of each frame: a float copy of a whole batch of frames (58 MB for a
        # minibatch of 512 Atari frames) is memory a sleeping rank does not need
        x = obs.flatten(1)[:, :1].float()
        return torch.tanh(self.layer(x)) + 0.0 * self.ballast[:1]


class PlainStep:
    """An optimiser step of one vector pass (params -= lr * grads): Adam's seven passes
    over the ballast are compute a GPU does, not coordination, and would crowd 2 cores."""

    def __init__(self) -> None:
        self.steps = 0

    def step(self, params: torch.Tensor, grads: torch.Tensor, lr: float) -> None:
        self.steps += 1
        params.add_(grads, alpha=-lr)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "plain", "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state.get("steps", 0))


def _zero_loss(module: nn.Module) -> torch.Tensor:
    """Zero, with a gradient (of zeros) for every parameter of ``module``."""
    return sum((p.sum() for p in module.parameters()), torch.zeros(())) * 0.0


class SleepsOnPolicy:
    """What the on-policy emulations share: the plain optimiser step and a loss that sleeps
    (a mixin before the algorithm's class)."""

    actor: nn.Module
    stat_names: tuple[str, ...]
    _optimizer: Any

    @property
    def optimizer(self) -> PlainStep:
        if self._optimizer is None:
            self._optimizer = PlainStep()
        return self._optimizer

    def loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        time.sleep(_seconds("HPCRL_EMU_LOSS_S"))
        return _zero_loss(self.actor), {name: 0.0 for name in self.stat_names}


class SleepingPPO(SleepsOnPolicy, hpcrl.PPO):
    """PPO whose gradient steps sleep: the calibrated forward and backward of a minibatch."""


class SleepingIMPALA(SleepsOnPolicy, hpcrl.IMPALA):
    """IMPALA whose gradient steps sleep."""


class SleepingDQN(hpcrl.DQN):
    """DQN whose gradient steps sleep (the replay, its sampling and priorities are real)."""

    @property
    def optimizers(self) -> dict[str, PlainStep]:
        if self._optimizers is None:
            self._optimizers = {"q": PlainStep()}
        return self._optimizers

    def loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        time.sleep(_seconds("HPCRL_EMU_LOSS_S"))
        if batch.weights is not None:  # a prioritised batch: equal new priorities
            self.remember_td_errors(torch.ones(len(batch.actions)))
        return _zero_loss(self.q), {name: 0.0 for name in self.stat_names}
