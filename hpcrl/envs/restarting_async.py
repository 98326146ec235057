"""Subprocess envs whose subprocess comes back: one that hangs or dies is replaced.

An env that raises is made again inside its own process
(:class:`~hpcrl.envs.restarts.RestartingEnv`). One that hangs (a game stuck in a loop,
a simulator waiting on a dead socket) or kills its process (a segfault) cannot be caught
there. :class:`RestartingAsyncVectorEnv` is Gymnasium's ``AsyncVectorEnv`` (one subprocess
per env, same-step autoreset, observations in shared memory) whose ``step_wait`` waits at
most ``env.step_timeout_s`` for each env: an env still stepping then, or whose process is
gone, has its subprocess killed and started again, its env reset with a fresh seed, and its
step returned as a cut (reward 0, truncated, the last observation it returned as the final
one, :data:`~hpcrl.envs.restarts.CUT` and
:data:`~hpcrl.envs.restarts.RESTARTED` in the info), as an env made again in place
reports it. The other envs' steps are returned as they came.
"""
from __future__ import annotations

import copy
import multiprocessing
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_for_pipes
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import NoAsyncCallError
from gymnasium.vector import async_vector_env
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import CloudpickleWrapper, clear_mpi_env_vars, iterate
from gymnasium.vector.utils import create_shared_memory as _create_shared_memory

from hpcrl.envs.child_signals import stop_signals_held
from hpcrl.envs.restarts import (
    CUT,
    RESPAWNED,
    RESTARTED,
    EnvRestartsExhausted,
    fresh_seed,
)

JOIN_S = 5.0  # how long a killed subprocess is waited for


class RestartingAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """``AsyncVectorEnv`` of ``env_fns`` (same-step autoreset, shared memory) that replaces
    the subprocess of an env that hangs past ``step_timeout_s`` (0: never) or dies.

    ``label(i)`` names env ``i`` in messages (its global index)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], step_timeout_s: float,
                 label: Callable[[int], str] = lambda i: f"env {i}") -> None:
        # the shared observation memory Gymnasium makes for its workers (it keeps no handle
        # on it; a replaced worker needs it): taken as it is made
        made: list[Any] = []

        def recording(*args: Any, **kwargs: Any) -> Any:
            made.append(_create_shared_memory(*args, **kwargs))
            return made[-1]

        setattr(async_vector_env, "create_shared_memory", recording)  # noqa: B010
        try:
            super().__init__(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        finally:
            setattr(async_vector_env, "create_shared_memory", _create_shared_memory)  # noqa: B010
        self._shared = made[0]
        self.step_timeout_s, self.label = float(step_timeout_s), label
        self.respawns = [0] * self.num_envs
        self.base_seeds: list[int] = list(range(self.num_envs))
        self._last: Any = None  # the observations the last step or reset returned

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Gymnasium's reset; each env's seed is kept as the base of its fresh seeds."""
        if isinstance(seed, (list, tuple)):
            self.base_seeds = [int(s) if s is not None else i for i, s in enumerate(seed)]
        elif seed is not None:
            self.base_seeds = [int(seed) + i for i in range(self.num_envs)]
        obs, info = super().reset(seed=seed, options=options)
        self._last = copy.deepcopy(obs)
        return obs, info

    def step_wait(self, timeout: float | None = None
                  ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """What each env's step returned; an env that has not answered within
        ``step_timeout_s``, or whose process died, is replaced and its step is a cut."""
        self._assert_is_running()
        if self._state != AsyncState.WAITING_STEP:
            raise NoAsyncCallError("Calling `step_wait` without any prior call to "
                                   "`step_async`.", AsyncState.WAITING_STEP.value)
        results, failed = self._gather()
        successes = [i in failed or results[i][1] for i in range(self.num_envs)]
        self._raise_if_errors(successes)  # an env that gave up (its restarts spent)
        rewards = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            if i in failed:
                truncated[i] = True
                info = self._respawn(i, failed[i])
            else:
                step = results[i][0]
                rewards[i], terminated[i], truncated[i] = step[1], step[2], step[3]
                info = step[4]
            infos = self._add_info(infos, info, i)
        self._state = AsyncState.DEFAULT
        obs = copy.deepcopy(self.observations) if self.copy else self.observations
        self._last = copy.deepcopy(obs)
        return obs, rewards, terminated, truncated, infos

    def _gather(self) -> tuple[list[Any], dict[int, str]]:
        """Each env's answer (in env order, None for the failed ones) and why each env that
        did not answer failed."""
        deadline = (time.monotonic() + self.step_timeout_s if self.step_timeout_s > 0
                    else None)
        waiting = dict(enumerate(self.parent_pipes))
        results: list[Any] = [None] * self.num_envs
        failed: dict[int, str] = {}
        while waiting:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = wait_for_pipes(list(waiting.values()), timeout=left)
            if not ready:
                for i in waiting:
                    failed[i] = (f"hung: its step did not return within env.step_timeout_s="
                                 f"{self.step_timeout_s:g}")
                break
            for i, pipe in list(waiting.items()):
                if pipe not in ready:
                    continue
                del waiting[i]
                try:
                    results[i] = pipe.recv()
                except (EOFError, OSError):
                    failed[i] = self._death(i)
        return results, failed

    def _death(self, i: int) -> str:
        """Why env ``i``'s subprocess is gone (its exit status, or the signal that ended it)."""
        process = self.processes[i]
        process.join(timeout=JOIN_S)
        code = process.exitcode
        if code is not None and code < 0:
            try:
                return f"its process was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"its process was killed by signal {-code}"
        return f"its process ended (exit status {code})"

    def _respawn(self, i: int, why: str) -> dict[str, Any]:
        """Kill env ``i``'s subprocess, start another for it and reset its env with a fresh
        seed; returns the cut step's info (final observation: the last one it returned)."""
        old = self.processes[i]
        if old.is_alive():
            old.kill()
        old.join(timeout=JOIN_S)
        self.parent_pipes[i].close()
        ctx = multiprocessing.get_context(self.context)
        parent_pipe, child_pipe = ctx.Pipe()
        # the worker's arguments as Gymnasium starts one (no semaphore: no max_concurrency)
        args = (i, CloudpickleWrapper(self.env_fns[i]), child_pipe, parent_pipe, self._shared,
                self.error_queue, self.autoreset_mode, None)
        process = ctx.Process(  # type: ignore[attr-defined]
            target=self.worker or async_vector_env._async_worker, name=old.name, args=args,
            daemon=self.daemon)
        with clear_mpi_env_vars(), stop_signals_held():  # as make_vector_env starts them
            process.start()
        child_pipe.close()
        self.parent_pipes[i], self.processes[i] = parent_pipe, process
        self.respawns[i] += 1
        seed = fresh_seed(self.base_seeds[i], RESPAWNED, self.respawns[i])
        parent_pipe.send(("reset", {"seed": seed, "options": None}))
        wait = self.step_timeout_s if self.step_timeout_s > 0 else None
        if not parent_pipe.poll(wait):
            raise EnvRestartsExhausted(f"{self.label(i)}'s new subprocess did not reset within "
                                       f"env.step_timeout_s={self.step_timeout_s:g} after "
                                       f"its last one {why}")
        try:
            (_, info), ok = parent_pipe.recv()
        except (EOFError, OSError):
            raise EnvRestartsExhausted(f"{self.label(i)}'s new subprocess died in its first "
                                       f"reset after its last one {why}") from None
        if not ok:
            self._raise_if_errors([j != i for j in range(self.num_envs)])
        last = next(item for k, item in enumerate(iterate(self.single_observation_space,
                                                          self._last)) if k == i)
        return {**info, "final_obs": last, "final_info": {CUT: why}, RESTARTED: why}
