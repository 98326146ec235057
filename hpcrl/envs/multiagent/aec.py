"""PettingZoo's AEC (turn-based) envs as seats: one seat acts at a time.

The adapter drives ``agent_selection`` itself: after the acting seat's move it gives every
seat the env selects whose match has ended its dead step (``step(None)``), reporting that
seat's final step, until a seat that can act is selected or no agent is left (the match is
over). Rewards are read from ``env.rewards`` after every env step, the dead steps included,
and summed per seat between its turns: the loser of a board game gets its -1 on the winner's
turn, and it reaches the loser's last move.
"""
from __future__ import annotations

from typing import Any

from hpcrl.envs.multiagent.seats import SeatEnv


def is_aec(env: Any) -> bool:
    """Whether ``env`` follows PettingZoo's AEC API (asked of its class: PettingZoo's
    order-enforcing wrapper refuses attribute reads before the first reset)."""
    kind = type(env)
    return callable(getattr(kind, "agent_iter", None)) and callable(getattr(kind, "last", None))


class AECSeats(SeatEnv):
    """A PettingZoo AEC env (``AECEnv``: classic board games, OpenSpiel through shimmy) as a
    :class:`~hpcrl.envs.multiagent.seats.SeatEnv`."""

    _inner: Any = None  # the env inside PettingZoo's wrappers (:meth:`_state`)

    def _begin(self, seed: int) -> None:
        self.env.reset(seed=seed)
        self._settle()

    def _advance(self, actions: dict[str, Any]) -> None:
        env, state = self.env, self._state()
        env.step(actions[state.agent_selection])
        self._receive(state.rewards)
        self._settle()

    def _state(self) -> Any:
        """Where the env's ``agents``, ``agent_selection``, ``rewards``, ``terminations``,
        ``truncations`` and ``infos`` are read: the env inside PettingZoo's wrappers, which
        only forward them (through a ``__getattr__`` per wrapper and read, a third of a board
        game's step); moves and observations still go through the wrappers."""
        found = self._inner
        if found is None:
            from pettingzoo.utils.wrappers import BaseWrapper

            found = self.env
            while isinstance(found, BaseWrapper):
                found = found.env
            self._inner = found
        return found

    def _settle(self) -> None:
        """Give the selected seats whose match ended their dead steps, up to a seat that acts
        (reported ready) or an empty ``agents`` (the match is over)."""
        env, state = self.env, self._state()
        while state.agents:
            seat = state.agent_selection
            terminated = bool(state.terminations.get(seat, False))
            truncated = bool(state.truncations.get(seat, False))
            if not (terminated or truncated):
                self._seat_ready(seat, env.observe(seat), state.infos.get(seat))
                return
            self._seat_ends(seat, env.observe(seat), state.infos.get(seat), terminated,
                            truncated)
            env.step(None)
            self._receive(state.rewards)
