"""Envs that come back: an env that fails is closed, made again with a fresh seed, and its
unfinished episode cut.

An env that raises in ``step`` or ``reset`` (a simulator that lost its connection, a game
that hit a bug) would end its collector with every healthy env beside it. Instead,
:class:`RestartingEnv`, the outermost wrapper of every collector env, catches the error
where the env runs (in the collector's process, or in its subprocess), and:

- a failed ``step`` returns the episode's last observation again as a *cut*: reward 0,
  truncated, the error's text in the step's info under :data:`CUT`; the vector env's
  same-step autoreset then resets it, which makes the env again;
- a failed ``reset`` (an autoreset after an episode that ended well, or the reset after a
  cut) makes the env again and resets that one, at most ``max_restarts + 1`` tries in a
  row; the reset's info says :data:`RESTARTED`.

Every new env is seeded by :func:`fresh_seed`, from the seed its env was first reset with
and a count of how it came back: no seed is used twice, and a run does not depend on where
its envs run. What the collector makes of the marks (the cut as a truncation its learner
treats right, the count in ``progress.csv``, the bound ``env.max_restarts`` within
``env.restart_window`` steps) is :class:`RestartLedger`'s and the fillers'.

An env that hangs or kills its process cannot be caught from inside: where the envs run in
subprocesses, :class:`~hpcrl.envs.restarting_async.RestartingAsyncVectorEnv` replaces that
subprocess after ``env.step_timeout_s``, or at once when it died, with the same marks.
"""
from __future__ import annotations

import copy
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.errors import ExplainedError

CUT = "hpcrl_cut"  # step info: the episode was cut here by a failure (the error's text)
RESTARTED = "hpcrl_restart"  # reset info: the env was made again (the error's text)
RESTART_STREAM = 0x5E5  # seeds of envs made again, apart from every other stream

# what a fresh seed is for: an env made again in place, a subprocess replaced, a collector
# rank replaced (its envs' first seeds)
IN_PLACE, RESPAWNED, REPLACED = 1, 2, 3


class EnvFailure(ExplainedError):
    """An env failed for good while a collector stepped it: past ``env.max_restarts``, or
    with restarts off (``env.max_restarts: 0``). The message names the env and its last
    error. Its collector does not die of it: it tells rank 0, and the job checkpoints and
    stops with :data:`~hpcrl.runtime.signals.EXIT_ENV_FAILED` under every MPI (an orderly
    stop, where an uncaught error would lose the work since the last checkpoint)."""


class EnvRestartsExhausted(EnvFailure):
    """An env failed more often than ``env.max_restarts`` allows; the message names it and
    its last error."""


def fresh_seed(base: int, kind: int, count: int) -> int:
    """The seed of the ``count``-th env of ``kind`` (:data:`IN_PLACE`, :data:`RESPAWNED`,
    :data:`REPLACED`) that takes the place of an env first seeded with ``base``: drawn from
    a stream of its own, so it differs from every seed of the job's envs and from each
    other."""
    seq = np.random.SeedSequence([int(base) & 0xFFFFFFFF, RESTART_STREAM, kind, count])
    return int(seq.generate_state(1, np.uint32)[0])


def describe_error(err: BaseException) -> str:
    """``Type: message`` of an env's error, on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class RestartingEnv(gym.Wrapper):
    """The env ``make()`` builds, made again when it fails (see the module's docstring).

    ``max_restarts``: how many makes in a row a reset may try before it gives up (raising
    :class:`EnvRestartsExhausted`, which ends the collector as any error did before);
    ``label`` names the env in that message. The checkpoint state of the env inside
    (``hpcrl_state``) passes through.
    """

    def __init__(self, make: Callable[[], gym.Env], max_restarts: int, label: str = "env"
                 ) -> None:
        super().__init__(make())
        self.make, self.max_restarts, self.label = make, max_restarts, label
        self.base_seed: int | None = None  # the seed of its first seeded reset
        self.restarts = 0  # envs made again in this process
        self.last_error = ""
        self._broken = False  # a step failed: the next reset makes the env again
        self._last_obs: Any = None

    @property
    def hpcrl_state(self) -> dict[str, Any]:
        """The checkpoint state of the env inside
        (:class:`~hpcrl.envs.vector.CheckpointableEnv`)."""
        return self.env.get_wrapper_attr("hpcrl_state")

    @hpcrl_state.setter
    def hpcrl_state(self, state: dict[str, Any]) -> None:
        """Restore the env inside from a state :attr:`hpcrl_state` gave."""
        self.env.set_wrapper_attr("hpcrl_state", state)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """The env's step; a failure returns the last observation again as a cut (reward
        0, truncated, :data:`CUT` in the info) and marks the env to be made again at the
        next reset."""
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as err:
            self.last_error = describe_error(err)
            self._broken = True
            return self._last_obs, 0.0, False, True, {CUT: f"{self.last_error} (in step)"}
        self._last_obs = _kept(obs)
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """The env's reset (with ``seed`` when given: the first one's is remembered as the
        base of the fresh seeds); after a failed step, or when the reset fails, the env is
        made again and reset with a fresh seed (:data:`RESTARTED` in the info)."""
        if seed is not None and self.base_seed is None:
            self.base_seed = int(seed)
        why = f"{self.last_error} (in step)" if self._broken else None
        self._broken = False
        for _ in range(self.max_restarts + 1):
            if why is None:
                try:
                    obs, info = self.env.reset(seed=seed, options=options)
                except Exception as err:
                    self.last_error = describe_error(err)
                    why = f"{self.last_error} (in reset)"
                    continue
                self._last_obs = _kept(obs)
                return obs, info
            self._make_again()
            seed = fresh_seed(self.base_seed or 0, IN_PLACE, self.restarts)
            obs, info = self._first_reset(seed, options, why)
            if obs is not None:
                return obs, info
            why = f"{self.last_error} (in reset)"
        raise EnvRestartsExhausted(
            f"{self.label} failed {self.max_restarts + 1} times in a row, made again each "
            f"time (env.max_restarts={self.max_restarts}); its last error: {self.last_error}")

    def _make_again(self) -> None:
        """Close the failed env (whatever its close raises) and make a new one."""
        try:
            self.env.close()
        except Exception:
            pass
        self.restarts += 1
        self.env = self.make()

    def _first_reset(self, seed: int, options: dict[str, Any] | None, why: str
                     ) -> tuple[Any, dict[str, Any]]:
        """Reset the env just made; ``(None, {})`` when that fails too."""
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except Exception as err:
            self.last_error = describe_error(err)
            return None, {}
        self._last_obs = _kept(obs)
        return obs, {**info, RESTARTED: why}

    def close(self) -> None:
        """Close the env inside (a failed one's close may raise: ignored)."""
        try:
            self.env.close()
        except Exception:
            pass


def _kept(obs: Any) -> Any:
    """A copy of ``obs`` that later steps cannot change (an env may reuse its buffer)."""
    return obs.copy() if isinstance(obs, np.ndarray) else copy.deepcopy(obs)


def restartable(make: Callable[[], gym.Env], max_restarts: int, label: str
                ) -> Callable[[], gym.Env]:
    """A factory of :class:`RestartingEnv` around ``make`` (picklable where ``make`` is,
    for subprocesses); ``make`` itself when ``max_restarts`` is 0 (an env's error ends
    its collector)."""
    if max_restarts <= 0:
        return make
    return _Restartable(make, max_restarts, label)


class _Restartable:
    """A picklable factory of :class:`RestartingEnv` (a subprocess builds its env with it)."""

    def __init__(self, make: Callable[[], gym.Env], max_restarts: int, label: str) -> None:
        self.make, self.max_restarts, self.label = make, max_restarts, label

    def __call__(self) -> gym.Env:
        return RestartingEnv(self.make, self.max_restarts, self.label)


# -- what the collector makes of the marks -------------------------------------------------
def restart_marks(info: dict[str, Any], n: int
                  ) -> tuple[np.ndarray | None, list[tuple[int, str]]]:
    """The envs of a vector step (``n`` envs, ``info`` its info) whose episode was cut
    (a bool mask, None when none was) and every env made again in the step, with why."""
    final = info.get("final_info") or {}
    cut = None
    if "_" + CUT in final:
        cut = np.asarray(final["_" + CUT], bool)[:n]
        if not cut.any():
            cut = None
    made = []
    if "_" + RESTARTED in info:
        mask = np.asarray(info["_" + RESTARTED], bool)
        made = [(int(i), str(info[RESTARTED][i])) for i in np.flatnonzero(mask)]
    return cut, made


class RestartLedger:
    """A collector's count of its envs made again, and the bound on them.

    ``max_restarts`` restarts of one env within ``window`` of its steps are allowed; one
    more raises :class:`EnvRestartsExhausted`, naming the env (``env_offset`` + its index:
    its global index) and its last error. The first restart of each env is said once on
    ``say`` (later ones are counted, in :attr:`pending` until :meth:`take`).
    """

    def __init__(self, num_envs: int, env_offset: int, max_restarts: int, window: int,
                 say: Callable[[str], None] | None = None, where: str = "") -> None:
        self.env_offset, self.max_restarts, self.window = env_offset, max_restarts, window
        self.say = say if say is not None else _stderr
        self.where = where
        self.recent: list[deque[int]] = [deque() for _ in range(num_envs)]
        self.said: set[int] = set()
        self.pending = 0  # restarts not yet reported
        self.total = 0

    def note(self, env: int, step: int, why: str) -> None:
        """Env ``env`` (the collector's index) was made again at its step ``step``: counted,
        said the first time, refused past the bound."""
        self.pending += 1
        self.total += 1
        recent = self.recent[env]
        recent.append(step)
        while recent and recent[0] <= step - self.window:
            recent.popleft()
        index = self.env_offset + env
        if len(recent) > self.max_restarts:
            raise EnvRestartsExhausted(
                f"env {index} (global index){self.where} was made again {len(recent)} times "
                f"within {self.window} of its steps, more than env.max_restarts="
                f"{self.max_restarts} allows within env.restart_window={self.window}; its "
                f"last error: {why}. Fix the env, or raise env.max_restarts")
        if env not in self.said:
            self.said.add(env)
            self.say(f"hpcrl: env {index} (global index){self.where} failed at its step "
                     f"{step}: {why}; closed and made again with a fresh seed, the episode "
                     f"it was playing cut (its further restarts are counted in progress.csv's "
                     f"env_restarts, not said)")

    def take(self) -> int:
        """The restarts since the last call (what one buffer reports)."""
        count, self.pending = self.pending, 0
        return count


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
