"""How a collector acts with a :class:`~hpcrl.models.model_based.policy.PlanningPolicy`.

The engine holds what planning carries between steps for each of the collector's envs: its
plan state (:meth:`PlanningPolicy.initial_state`, reset when the env's episode ends) and its
noise generator, seeded by the job's seed and the env's global index, so what an env does
depends neither on how envs are spread over processes nor on which envs plan together. The
envs of one group (``scheme.env_groups``; one group unless asked) plan in one call, while the
other groups' envs step. Both are part of the collector's checkpoint. Its steps hold the
actions alone (:class:`~hpcrl.models.acting.Step`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hpcrl.models.acting import ComputesHere, Step
from hpcrl.models.model_based.planners import draw

if TYPE_CHECKING:  # annotations only: the policy imports the engine it declares
    from hpcrl.models.model_based.policy import PlanningPolicy

PLAN_STREAM = 0x91A  # seeds the envs' planning noise apart from every other stream


def plan_generator(seed: int, env_index: int) -> torch.Generator:
    """The planning noise generator of global env ``env_index`` of a job seeded ``seed``."""
    state = np.random.SeedSequence([seed, PLAN_STREAM, env_index]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


class PlanningEngine(ComputesHere):
    """Plans the actions of envs ``env_offset ..`` (``num_envs`` of them) with ``policy``;
    ``groups`` are the envs' groups, by index (each a slice of the envs; default: one group
    of all)."""

    def __init__(self, policy: PlanningPolicy, seed: int, env_offset: int,
                 num_envs: int, groups: Sequence[slice] = ()) -> None:
        self.policy = policy
        self.generators = [plan_generator(seed, env_offset + i) for i in range(num_envs)]
        self.state = policy.initial_state(num_envs)
        self.groups = list(groups) or [slice(0, num_envs)]
        self._answers: dict[int, Step] = {}

    def sync(self) -> None:
        """Nothing to re-take: the policy plans with its weights and statistics in place."""

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The planned actions of all the envs for their carried observations ``[B, ...]``
        (``noise`` unused: each env draws its own from its generator; ``state`` unused: the
        engine keeps the plans)."""
        return Step(self.plan(obs, slice(None)))

    def plan(self, obs: np.ndarray, cols: slice) -> np.ndarray:
        """Planned actions ``[B, A]`` in ``[-1, 1]`` for carried observations ``[B, ...]`` of
        the envs ``cols``, their plans advanced."""
        policy = self.policy
        shape, kind = policy.planner.noise_shape, policy.planner.noise
        draws = torch.stack([draw(kind, shape, g) for g in self.generators[cols]])
        device = policy.device
        with torch.no_grad():  # the plans stay ordinary tensors, reset in place
            features = policy.obs_format.encode(torch.from_numpy(obs).to(device))
            actions, self.state[cols] = policy.plan(features, self.state[cols],
                                                    draws.to(device))
        return actions.cpu().numpy().astype(np.float32)

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None,
               state: np.ndarray | None = None) -> None:
        """Plan the actions of group ``group``'s envs now (``noise`` and ``state`` unused);
        :meth:`~hpcrl.models.acting.ComputesHere.result` hands them over."""
        self._answers[group] = Step(self.plan(obs, self.groups[group]))

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Start the plans of the envs ``done`` (a boolean mask over the envs ``cols``)
        afresh (their episode ended)."""
        self.state[cols][torch.from_numpy(np.asarray(done, bool))] = 0.0

    def state_dict(self) -> dict[str, Any]:
        """The envs' plan states and generators, for a checkpoint."""
        return {"plans": self.state.cpu().clone(),
                "generators": [g.get_state() for g in self.generators]}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Restore :meth:`state_dict` (a checkpoint of as many envs): the generators always,
        the plans only where the envs were restored too (else every env starts afresh)."""
        if len(state["generators"]) != len(self.generators):
            raise ValueError(f"checkpoint holds the plans of {len(state['generators'])} envs, "
                             f"this collector plans for {len(self.generators)}")
        if envs_restored:
            self.state = state["plans"].to(self.policy.device).clone()
        for generator, saved in zip(self.generators, state["generators"], strict=True):
            generator.set_state(saved)
