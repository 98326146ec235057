"""The episodes PPO+D replays: demonstrations read from a file and the agent's own best.

Observations are kept as the env batches them (an array, a dict of arrays, a tuple of
them), so a replayed row goes into a vector env's batch beside the real envs' rows; the
small tree helpers here index and build such batches.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hpcrl.buffers.demos.files import read_demos

Obs = Any  # an env's batch of observations: an array, a dict of arrays or a tuple of them


def take(obs: Obs, index: Any) -> Obs:
    """``obs[index]`` in every leaf of a batch of observations."""
    if isinstance(obs, dict):
        return {k: take(v, index) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(take(v, index) for v in obs)
    return obs[index]


def put(out: Obs, index: Any, value: Obs) -> None:
    """``out[index] = value`` in every leaf."""
    if isinstance(out, dict):
        for k in out:
            put(out[k], index, value[k])
    elif isinstance(out, tuple):
        for o, v in zip(out, value, strict=True):
            put(o, index, v)
    else:
        out[index] = value


def empty(like: Obs, n: int) -> Obs:
    """A batch of ``n`` zero observations shaped and typed as ``like``'s rows."""
    if isinstance(like, dict):
        return {k: empty(v, n) for k, v in like.items()}
    if isinstance(like, tuple):
        return tuple(empty(v, n) for v in like)
    return np.zeros((n,) + np.shape(like)[1:], np.asarray(like).dtype)


def file_obs(arrays: dict[str, np.ndarray]) -> Obs:
    """A demonstration file's observations as the env batches them (``obs``, or a dict of
    its ``obs/<key>`` arrays, or a tuple of its ``obs/<i>`` arrays)."""
    if "obs" in arrays:
        return arrays["obs"]
    keys = [k[4:] for k in arrays if k.startswith("obs/")]
    if all(k.isdigit() for k in keys):
        return tuple(arrays[f"obs/{i}"] for i in sorted(map(int, keys)))
    return {k: arrays[f"obs/{k}"] for k in keys}


class Episode:
    """One episode's rows: observations (a tree), actions, rewards, terminated, truncated."""

    def __init__(self, obs: Obs, actions: np.ndarray, rewards: np.ndarray,
                 terminated: np.ndarray, truncated: np.ndarray) -> None:
        self.obs, self.actions, self.rewards = obs, actions, rewards
        self.terminated, self.truncated = terminated, truncated
        self.length = len(rewards)
        self.ret = float(np.sum(rewards, dtype=np.float64))

    def state(self) -> dict[str, Any]:
        """The episode's rows as the keyword arguments that rebuild it (for a checkpoint)."""
        return {"obs": self.obs, "actions": self.actions, "rewards": self.rewards,
                "terminated": self.terminated, "truncated": self.truncated}


def episodes_of(arrays: dict[str, np.ndarray]) -> list[Episode]:
    """The episodes of a demonstration file's arrays (see :mod:`hpcrl.buffers.demos.files`)."""
    obs = file_obs(arrays)
    ends = np.flatnonzero(arrays["terminated"] | arrays["truncated"]) + 1
    out, start = [], 0
    for end in ends:
        rows = slice(start, int(end))
        out.append(Episode(take(obs, rows), arrays["actions"][rows], arrays["rewards"][rows],
                           arrays["terminated"][rows], arrays["truncated"][rows]))
        start = int(end)
    return out


class DemoBuffer:
    """The demonstrations and the agent's best own episodes (see the module docstring)."""

    def __init__(self, demos: Sequence[Episode], own_capacity: int) -> None:
        if not demos:
            raise ValueError("a demonstration buffer needs at least one episode")
        self.demos = list(demos)
        self.own: list[Episode] = []
        self.capacity = own_capacity
        self.threshold = min(e.ret for e in self.demos)
        self.added = 0  # own episodes that joined so far

    @staticmethod
    def from_file(path: str, own_capacity: int) -> DemoBuffer:
        """A buffer of the episodes in demonstration file ``path`` (``algo.ppo.demos``), with
        room for ``own_capacity`` of the agent's (``algo.ppo.demos_own``)."""
        return DemoBuffer(episodes_of(read_demos(path)), own_capacity)

    @property
    def episodes(self) -> list[Episode]:
        """The episodes a replay slot draws from: the demonstrations, then the own ones held."""
        return self.demos + self.own

    def offer(self, episode: Episode) -> bool:
        """Keep ``episode`` of the agent's if it is as good as the demonstrations (and better
        than the worst own episode held, when full); returns whether it joined."""
        if self.capacity <= 0 or episode.ret < self.threshold:
            return False
        if len(self.own) >= self.capacity:
            worst = min(range(len(self.own)), key=lambda i: (self.own[i].ret, -i))
            if self.own[worst].ret > episode.ret:
                return False
            del self.own[worst]
        self.own.append(episode)
        self.added += 1
        return True

    def state_dict(self) -> dict[str, Any]:
        """The own episodes held and the count that joined (the demonstrations come from the
        file again)."""
        return {"own": [e.state() for e in self.own], "added": self.added}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.own = [Episode(**e) for e in state["own"]]
        self.added = int(state["added"])


def copy_row(obs: Obs) -> Obs:
    """A row of its own (not a view that would keep the step's whole batch alive)."""
    if isinstance(obs, dict):
        return {k: copy_row(v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(copy_row(v) for v in obs)
    return np.array(obs)


def stack_rows(rows: list[Obs]) -> Obs:
    """One batch of ``rows`` (observation trees), stacked along a new first axis in every leaf."""
    first = rows[0]
    if isinstance(first, dict):
        return {k: stack_rows([r[k] for r in rows]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_rows([r[i] for r in rows]) for i in range(len(first)))
    return np.stack([np.asarray(r) for r in rows])
