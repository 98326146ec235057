"""PettingZoo's Parallel envs as seats: every live agent acts at every step.

Agents come and go: a seat acts while it is in the env's ``agents`` and has an observation;
a seat that the step marks terminated or truncated gets its final step and acts no more; a
seat that appears in ``agents`` (with an observation) acts from then on. The match is over
when no seat is left to act.
"""
from __future__ import annotations

from typing import Any

from hpcrl.envs.multiagent.seats import SeatEnv


class ParallelSeats(SeatEnv):
    """A PettingZoo Parallel env (``ParallelEnv``: MPE, butterfly, simultaneous moves) as a
    :class:`~hpcrl.envs.multiagent.seats.SeatEnv`."""

    def _begin(self, seed: int) -> None:
        obs, infos = self.env.reset(seed=seed)
        self._ready_all(obs, infos)

    def _advance(self, actions: dict[str, Any]) -> None:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        self._receive(rewards)
        for seat in (*actions, *rewards, *obs):
            terminated = bool(terminations.get(seat, False))
            truncated = bool(truncations.get(seat, False))
            if terminated or truncated:
                self._seat_ends(seat, obs.get(seat), infos.get(seat), terminated, truncated)
        self._ready_all(obs, infos)

    def _ready_all(self, obs: dict[str, Any], infos: dict[str, Any]) -> None:
        """Every seat in ``agents`` with an observation acts next (an ended one does not)."""
        for seat in self.env.agents:
            if seat in obs:
                self._seat_ready(seat, obs[seat], infos.get(seat))
