"""Planners of model-predictive control: each env step, the best action sequence under a model.

A planner sees the model only through ``returns``: a function from candidate action
sequences ``[B, C, H, A]`` (``B`` envs, ``C`` candidates, horizon ``H``, actions in
``[-1, 1]``) to their planned returns ``[B, C]``, which rolls every candidate out under every
ensemble member in one batched pass per horizon step. The planner itself is tensor code over
all envs and candidates at once: no Python loop runs per candidate (only over iterations,
and for PDDM's filter over horizon steps).

Every random number is an input (``noise``, ``[B, *noise_shape]``, standard normal or uniform
on ``[0, 1)`` as :attr:`Planner.noise` says), drawn by the caller from its own generators: a
collector draws each env's from that env's stream, an evaluation from its step's, so a plan
depends on the observation, the env's plan so far and its noise, never on which envs were
batched together. Each env carries a plan ``[H, A]`` from step to step (:meth:`Planner.shift`
moves it on by one step): CEM and PDDM start from it, random shooting ignores it.

- :class:`RandomShooting`: the best of ``C`` uniform sequences.
- :class:`CrossEntropy` (Botev et al. 2013; PETS, Chua et al. 2018): ``iterations`` times,
  sample around a Gaussian, refit it to the ``elites`` best (blended with the old by
  ``cem_alpha``); act with the mean's first action.
- :class:`Pddm` (Nagabandi et al. 2019): noise filtered over the horizon,
  ``n_t = beta u_t + (1 - beta) n_(t-1)``, on the mean; the new mean weighs each candidate by
  ``exp(gamma (R - max R))``; act with its first action.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Literal

import torch

from hpcrl.sections.algorithm_keys import MpcConfig

Returns = Callable[[torch.Tensor], torch.Tensor]


class Planner(ABC):
    """Plans ``horizon`` steps of ``action_dim`` actions with the keys of ``settings``."""

    noise: Literal["normal", "uniform"] = "normal"

    def __init__(self, settings: MpcConfig, action_dim: int) -> None:
        self.settings = settings
        self.horizon, self.action_dim = settings.horizon, action_dim
        self.candidates = settings.candidates

    @property
    @abstractmethod
    def noise_shape(self) -> tuple[int, ...]:
        """The shape of one env's noise for one planning call."""

    @abstractmethod
    def plan(self, returns: Returns, mean: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """The actions ``[B, A]`` to take now and the plan ``[B, H, A]`` they start, from
        each env's plan so far ``mean`` and its ``noise``."""

    def shift(self, plan: torch.Tensor) -> torch.Tensor:
        """The plan of the next env step: this one moved on by a step, its last step the
        initial mean (0, the middle of the action range)."""
        return torch.cat([plan[:, 1:], torch.zeros_like(plan[:, :1])], dim=1)

    def _sequence(self, mean: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Candidates ``mean + offsets`` ``[B, C, H, A]``, clipped to the action range."""
        return (mean[:, None] + offsets).clamp_(-1.0, 1.0)


class RandomShooting(Planner):
    """The best of ``candidates`` sequences drawn uniformly from the action range."""

    noise = "uniform"

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """``[C, H, A]`` uniforms on ``[0, 1)``."""
        return (self.candidates, self.horizon, self.action_dim)

    def plan(self, returns: Returns, mean: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """The first action of each env's best candidate, and that candidate."""
        sequences = noise * 2.0 - 1.0
        best = returns(sequences).argmax(dim=1)
        chosen = sequences[torch.arange(len(best), device=best.device), best]
        return chosen[:, 0], chosen


class CrossEntropy(Planner):
    """The cross-entropy method over Gaussian action sequences, warm-started by the plan."""

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """``[iterations, C, H, A]`` standard normals."""
        return (self.settings.iterations, self.candidates, self.horizon, self.action_dim)

    def plan(self, returns: Returns, mean: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``iterations`` refits of mean and std to the elites; the mean's first action."""
        s = self.settings
        alpha, elites = s.cem_alpha, s.elites
        std = torch.full_like(mean, s.sample_std)
        shape = (-1, elites, self.horizon, self.action_dim)
        for i in range(s.iterations):
            sequences = self._sequence(mean, std[:, None] * noise[:, i])
            top = returns(sequences).topk(elites, dim=1).indices
            chosen = sequences.gather(1, top[:, :, None, None].expand(shape))
            mean = alpha * mean + (1.0 - alpha) * chosen.mean(dim=1)
            std = alpha * std + (1.0 - alpha) * chosen.std(dim=1, unbiased=False)
        return mean[:, 0], mean


class Pddm(Planner):
    """PDDM's filtered-noise sampling and return-weighted mean, shifted between steps."""

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """``[iterations, C, H, A]`` standard normals."""
        return (self.settings.iterations, self.candidates, self.horizon, self.action_dim)

    def filtered(self, noise: torch.Tensor) -> torch.Tensor:
        """``n_t = beta x sigma u_t + (1 - beta) x n_(t-1)`` along the horizon (axis 2 of
        ``[B, C, H, A]``), from ``n_(-1) = 0``."""
        beta = self.settings.beta
        u = noise * self.settings.sample_std
        out = torch.empty_like(u)
        previous = torch.zeros_like(u[:, :, 0])
        for t in range(self.horizon):
            previous = beta * u[:, :, t] + (1.0 - beta) * previous
            out[:, :, t] = previous
        return out

    def plan(self, returns: Returns, mean: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``iterations`` reweightings of the mean by ``softmax(gamma x returns)`` over the
        candidates; the mean's first action."""
        for i in range(self.settings.iterations):
            sequences = self._sequence(mean, self.filtered(noise[:, i]))
            weights = torch.softmax(self.settings.gamma * returns(sequences), dim=1)
            mean = (weights[:, :, None, None] * sequences).sum(dim=1)
        return mean[:, 0], mean

    def shift(self, plan: torch.Tensor) -> torch.Tensor:
        """The plan moved on by a step, its last step repeated (PDDM's)."""
        return torch.cat([plan[:, 1:], plan[:, -1:]], dim=1)


PLANNERS: dict[str, type[Planner]] = {"rs": RandomShooting, "cem": CrossEntropy,
                                      "pddm": Pddm}


def make_planner(settings: MpcConfig, action_dim: int) -> Planner:
    """The planner ``settings.planner`` names."""
    return PLANNERS[settings.planner](settings, action_dim)


def draw(kind: str, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Standard normals (``kind="normal"``) or uniforms on ``[0, 1)`` of ``shape`` from
    ``generator`` (on the CPU)."""
    if kind == "uniform":
        return torch.rand(shape, generator=generator)
    return torch.randn(shape, generator=generator)
