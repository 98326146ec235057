"""Fault injection on real ranks, imported by env id as ``hpcrl_faults:FaultyCartPole-v0``
(or, for a self-play league, the multi-agent env.id ``hpcrl_faults:faulty_tictactoe``).

``HPCRL_FAULT`` says what happens to which ranks, as ``WHEN:RANKS`` with ``RANKS`` like
``2`` or ``2,3`` (``OMPI_COMM_WORLD_RANK`` under Open MPI, ``PMI_RANK`` under MPICH,
``SLURM_PROCID`` under srun), or several of those apart by ``;`` (``rollout:2;send:3``:
each rank the fault that names it):

* ``rollout:R``  SIGKILL in the middle of a rollout (``HPCRL_FAULT_STEP`` env steps in);
* ``send:R``     SIGKILL right after a rollout's send started (its data still in flight);
* ``weights:R``  SIGKILL right after a weights message's header arrived, its parameters
  still on their way;
* ``raise:R``    the env raises ``RuntimeError`` in a rollout;
* ``flaky:R``    the env raises ``RuntimeError`` at random, with probability
  ``HPCRL_FAULT_P`` (default 0.001) at each step from ``HPCRL_FAULT_STEP`` on (each env
  draws from its own stream: the rank, its pid and its count of envs built);
* ``hang:R``     SIGSTOP in a rollout (the learner's ``scheme.collector_timeout_s`` kills it).

The patches are made when the env is built on a faulty rank, before its loop starts; every
other rank runs unchanged. ``HPCRL_FAULT_AFTER_S`` holds the fault back until that many
seconds after the env was built (so that the job has checkpointed first).
``HPCRL_FAULT_PACE``, as ``SECONDS:RANKS``, makes each env step on those ranks sleep that
many seconds: a bound on their pace whatever the machine, so that a small budget still
lasts past a wait such as ``scheme.collector_timeout_s``.
"""
from __future__ import annotations

import itertools
import os
import random
import signal
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv


def _faults() -> list[tuple[str, set[str]]]:
    """Each ``WHEN:RANKS`` of ``HPCRL_FAULT``."""
    out = []
    for spec in os.environ.get("HPCRL_FAULT", "").split(";"):
        when, _, ranks = spec.strip().partition(":")
        out.append((when, {r for r in ranks.split(",") if r}))
    return out


def _rank() -> str:
    return next((os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
                 if v in os.environ), "")


def _faulty() -> str | None:
    rank = _rank()
    return next((when for when, ranks in _faults() if rank in ranks), None)


def _pace_s() -> float:
    """The seconds each env step sleeps on this rank (``HPCRL_FAULT_PACE``)."""
    seconds, _, ranks = os.environ.get("HPCRL_FAULT_PACE", "").partition(":")
    return float(seconds) if _rank() in {r for r in ranks.split(",") if r} else 0.0


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


_PATCHED = False
_BUILT = time.monotonic()
_ENVS_BUILT = itertools.count()


def _armed() -> bool:
    return time.monotonic() - _BUILT >= float(os.environ.get("HPCRL_FAULT_AFTER_S", "0"))


def _patch(when: str) -> None:
    """Kill this rank inside the library code the fault names."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    if when == "send":
        from hpcrl.exchange import streams

        original_send = streams.StreamOut.send

        def send(self, buffer):
            requests = original_send(self, buffer)
            if _armed():
                _kill()
            return requests

        streams.StreamOut.send = send
    elif when == "weights":
        from hpcrl.exchange import latest_weights

        original_post = latest_weights.ParamsReceiver.post

        def post(self):
            request = original_post(self)
            if _armed():
                _kill()
            return request

        latest_weights.ParamsReceiver.post = post


class _Faulty:
    """The fault of ``HPCRL_FAULT`` for the env class it is mixed into."""

    def _arm(self) -> None:
        self.when = _faulty()
        self.steps = 0
        self.at = int(os.environ.get("HPCRL_FAULT_STEP", "200"))
        self.p = float(os.environ.get("HPCRL_FAULT_P", "0.001"))
        self.pace_s = _pace_s()
        self.draws = random.Random(f"{os.getpid()}-{next(_ENVS_BUILT)}")
        if self.when in ("send", "weights"):
            _patch(self.when)

    def step(self, action):
        self.steps += 1
        if self.pace_s:
            time.sleep(self.pace_s)
        if self.when in ("rollout", "raise", "hang", "flaky") and self.steps >= self.at \
                and _armed():
            if self.when == "rollout":
                _kill()
            if self.when == "raise":
                raise RuntimeError("the env broke (injected fault)")
            if self.when == "flaky":
                if self.draws.random() < self.p:
                    raise RuntimeError("the env broke at random (injected fault)")
            else:
                os.kill(os.getpid(), signal.SIGSTOP)
        return super().step(action)


class FaultyCartPole(_Faulty, CartPoleEnv):
    """CartPole on which ``HPCRL_FAULT`` strikes the ranks it names."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._arm()


class FaultyPendulum(_Faulty, PendulumEnv):
    """Pendulum (continuous actions, for SAC) on which ``HPCRL_FAULT`` strikes."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._arm()


def faulty_tictactoe(**kwargs):
    """PettingZoo's tic-tac-toe (AEC) on which ``HPCRL_FAULT`` strikes: a league's game."""
    from pettingzoo.classic import tictactoe_v3
    from pettingzoo.utils.wrappers import BaseWrapper

    class FaultyGame(_Faulty, BaseWrapper):
        def __init__(self, env) -> None:
            BaseWrapper.__init__(self, env)
            self._arm()

    return FaultyGame(tictactoe_v3.env(**kwargs))


gym.register("FaultyCartPole-v0", entry_point=FaultyCartPole, max_episode_steps=500)
gym.register("FaultyPendulum-v0", entry_point=FaultyPendulum, max_episode_steps=200)
