"""PPO+D's replay of demonstrations (Libardi et al. 2020, the seed's PPOD buffers).

A fraction ``algo.ppo.demos_fraction`` of the job's env slots replays episodes instead of
stepping an env: the slots are fixed by global env index (:func:`demo_slots`, the same for
any layout), so a collector holding envs ``[a, b)`` steps real envs in its other slots only.
A replay slot plays an episode of the :class:`DemoBuffer` row by row, its observations,
actions, rewards and episode ends going into the rollout as any slot's do; when the episode
ends it draws the next one (its own generator, seeded by the job's seed and its index). The
policy's advantage on those steps then pulls it towards the demonstrated actions through
PPO's ordinary loss, the learner taking the demonstrated actions' log-probabilities under the
weights it starts the update with as the "old" ones (:func:`replayed_log_probs`).

The buffer holds the demonstrations of ``algo.ppo.demos`` (never evicted) and up to
``algo.ppo.demos_own`` of the agent's own best episodes: an episode of a real slot whose return
is at least the lowest return of the demonstrations joins, evicting the worst own episode
held when full, so the agent replays what it does as well as its teacher.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.buffers.demos.episodes import (
    DemoBuffer,
    Episode,
    Obs,
    copy_row,
    empty,
    file_obs,
    put,
    stack_rows,
    take,
)
from hpcrl.buffers.demos.files import read_demos
from hpcrl.buffers.rollout import Rollout
from hpcrl.envs.restarts import restart_marks
from hpcrl.envs.scripted import ScriptedSlots
from hpcrl.envs.state import from_plain, to_plain
from hpcrl.envs.vector import reset_seeded, vector_call, vector_set_attr

if TYPE_CHECKING:
    from hpcrl.models.actor import ActorCritic


def demo_slots(total_envs: int, fraction: float) -> np.ndarray:
    """Which global env slots replay demonstrations: ``floor(fraction x total)`` of them,
    spread evenly (slot ``i`` replays where ``floor((i + 1) x fraction)`` steps up)."""
    index = np.arange(total_envs)
    return np.floor((index + 1) * fraction + 1e-9) > np.floor(index * fraction + 1e-9)


class _Playback:
    """Where one replay slot is: which episode, which row, and its generator (a slot always
    plays an episode: it draws its first from ``buffer`` as it is made)."""

    def __init__(self, seed: int, buffer: DemoBuffer) -> None:
        self.rng = np.random.default_rng([seed, 0xD3])
        self.episode: Episode
        self.row = 0
        self.start(buffer)

    def start(self, buffer: DemoBuffer) -> None:
        episodes = buffer.episodes
        self.episode = episodes[int(self.rng.integers(len(episodes)))]
        self.row = 0


class DemoSlots(ScriptedSlots):
    """A vector env of ``len(slots)`` envs: the real vector env ``real`` in the slots that are
    False, demonstration replay in those that are True (same-step autoreset and info layout
    as the real env's, widened to every slot)."""

    def __init__(self, real: gym.vector.VectorEnv, slots: np.ndarray, buffer: DemoBuffer
                 ) -> None:
        self.real, self.slots, self.buffer = real, np.asarray(slots, bool), buffer
        self.num_envs = len(self.slots)
        self.replay_index = np.flatnonzero(self.slots)
        self.real_index = np.flatnonzero(~self.slots)
        if len(self.real_index) != real.num_envs:
            raise ValueError(f"{real.num_envs} real envs for {len(self.real_index)} real slots")
        self.single_observation_space = real.single_observation_space
        self.single_action_space = real.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space,
                                                         self.num_envs)
        self.metadata = getattr(real, "metadata", {})
        self.playback: list[_Playback] = []
        self.obs: Obs = None
        self.recording: list[list[tuple]] = [[] for _ in self.real_index]

    # -- the slots' rows ------------------------------------------------------------------
    def _row(self, play: _Playback) -> Obs:
        return take(play.episode.obs, play.row)

    def _compose(self, real_obs: Obs) -> Obs:
        out = empty(real_obs, self.num_envs)
        put(out, self.real_index, real_obs)
        for slot, play in zip(self.replay_index, self.playback, strict=True):
            put(out, slot, self._row(play))
        return out

    def replayed_actions(self) -> tuple[np.ndarray, np.ndarray]:
        """The replay slots and the actions their episodes take at this step."""
        actions = [play.episode.actions[play.row] for play in self.playback]
        return self.replay_index, np.asarray(actions)

    # -- the vector env -------------------------------------------------------------------
    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Obs, dict[str, Any]]:
        """Reset the real envs (with their slots' seeds) and restart every replay slot on an
        episode drawn by a generator seeded with its slot's seed (0 when none); the recordings
        of own episodes start empty."""
        seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * self.num_envs
        real_seeds = [seeds[i] for i in self.real_index]
        obs, info = reset_seeded(self.real, real_seeds, options)
        # each slot's generator from its env's seed (unseeded: its slot index, still apart)
        self.playback = [_Playback(int(i) if seeds[i] is None else int(seeds[i]), self.buffer)
                         for i in self.replay_index]
        self.recording = [[] for _ in self.real_index]
        self.obs = self._compose(obs)
        return self.obs, _widen(info, self.real_index, self.num_envs)

    def step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray,
                                                  dict[str, Any]]:
        """Step the real envs with their slots' actions (recording their episodes for the buffer)
        and advance each replay slot one row: its reward and episode ends come from the file,
        and a finished episode is followed by a newly drawn one (same-step autoreset; a
        truncated one's last observation stands in as its final observation)."""
        actions = np.asarray(actions)
        real_actions = actions[self.real_index]
        before = self.obs
        obs, rew, term, trunc, info = self.real.step(real_actions)
        info = _widen(info, self.real_index, self.num_envs)
        rewards = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        rewards[self.real_index], terminated[self.real_index] = rew, term
        truncated[self.real_index] = trunc
        self._record(before, real_actions, rew, term, trunc, info)
        finals = []
        for slot, play in zip(self.replay_index, self.playback, strict=True):
            ep, row = play.episode, play.row
            rewards[slot] = ep.rewards[row]
            terminated[slot], truncated[slot] = bool(ep.terminated[row]), bool(ep.truncated[row])
            if terminated[slot] or truncated[slot]:
                if truncated[slot] and not terminated[slot]:
                    # the file holds no observation after the cut: the last one stands in
                    finals.append((int(slot), take(ep.obs, row)))
                play.start(self.buffer)
            else:
                play.row += 1
        if finals:
            _add_finals(info, finals, self.num_envs)
        self.obs = self._compose(obs)
        return self.obs, rewards, terminated, truncated, info

    def _record(self, before: Obs, actions: np.ndarray, rewards: np.ndarray,
                terminated: np.ndarray, truncated: np.ndarray, info: dict[str, Any]) -> None:
        """Keep each real slot's episode so far; offer the finished ones to the buffer (not
        one a failure cut: its last step is none, :mod:`hpcrl.envs.restarts`)."""
        if self.buffer.capacity <= 0:
            return
        cut, _ = restart_marks(info, self.num_envs)
        for k, slot in enumerate(self.real_index):
            self.recording[k].append((copy_row(take(before, slot)), np.array(actions[k]),
                                      float(rewards[k]),
                                      bool(terminated[k]), bool(truncated[k])))
            if terminated[k] or truncated[k]:
                rows = self.recording[k]
                self.recording[k] = []
                if cut is not None and cut[slot]:
                    continue
                obs = stack_rows([r[0] for r in rows])
                self.buffer.offer(Episode(obs, np.stack([r[1] for r in rows]),
                                          np.asarray([r[2] for r in rows], np.float32),
                                          np.asarray([r[3] for r in rows]),
                                          np.asarray([r[4] for r in rows])))

    # -- checkpoints (through Collector.state_dict's vector_env_state) ---------------------
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        """Only ``hpcrl_state``: the real envs' states in their slots, an empty state (nothing
        missing) in the replay slots; any other name raises AttributeError."""
        if name != "hpcrl_state":
            raise AttributeError(f"DemoSlots forwards only hpcrl_state, not {name!r}")
        real = list(vector_call(self.real, name))
        out: list[Any] = [None] * self.num_envs
        for k, slot in enumerate(self.real_index):
            out[slot] = real[k]
        for slot in self.replay_index:
            out[slot] = {"missing": []}
        return tuple(out)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on the real envs, to the values of their slots."""
        vector_set_attr(self.real, name, [values[i] for i in self.real_index])

    def replay_state(self) -> dict[str, Any]:
        """The buffer's own episodes and each replay slot's place, for a checkpoint."""
        episodes = self.buffer.episodes
        return to_plain({
            "buffer": self.buffer.state_dict(), "obs": self.obs,
            "recording": self.recording,
            "slots": [_slot_state(play, episodes) for play in self.playback]})

    def load_replay_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`replay_state` (after the real envs' own states)."""
        state = from_plain(state)
        self.buffer.load_state_dict(state["buffer"])
        episodes = self.buffer.episodes
        for play, saved in zip(self.playback, state["slots"], strict=True):
            from_plain(to_plain(saved["rng"]), play.rng)
            at = int(saved["episode"])
            play.episode = episodes[at] if at >= 0 else Episode(**saved["data"])
            play.row = int(saved["row"])
        self.obs = state["obs"]
        self.recording = [list(rows) for rows in state["recording"]]

    def close(self, **kwargs: Any) -> None:
        """Close the real vector env."""
        self.real.close(**kwargs)


def _slot_state(play: _Playback, episodes: list[Episode]) -> dict[str, Any]:
    """A replay slot's place: its generator, the episode (its index in ``episodes``, or its
    rows when the buffer evicted it while the slot plays it) and the row."""
    at = next((i for i, e in enumerate(episodes) if e is play.episode), -1)
    state = {"rng": play.rng, "episode": at, "row": play.row}
    if at < 0:
        state["data"] = play.episode.state()
    return state


def _widen(info: dict[str, Any], index: np.ndarray, n: int) -> dict[str, Any]:
    """A vector info of the real envs as one of ``n`` slots (masks False elsewhere)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out[key] = _widen(value, index, n)
        elif isinstance(value, np.ndarray) and value.shape[:1] == (len(index),):
            wide = (np.empty(n, object) if value.dtype == object
                    else np.zeros((n,) + value.shape[1:], value.dtype))
            wide[index] = value
            out[key] = wide
        else:
            out[key] = value
    return out


def _add_finals(info: dict[str, Any], finals: list[tuple[int, Obs]], n: int) -> None:
    """Record replayed episodes cut by truncation in ``final_obs`` (an object per slot)."""
    if "final_obs" not in info:
        info["final_obs"] = np.empty(n, object)
        info["_final_obs"] = np.zeros(n, bool)
    elif info["final_obs"].dtype != object:
        boxed = np.empty(n, object)
        for i in range(n):
            boxed[i] = info["final_obs"][i]
        info["final_obs"] = boxed
    for slot, obs in finals:
        info["final_obs"][slot] = obs
        info["_final_obs"][slot] = True


def slots_of_collector(total_envs: int, fraction: float, env_offset: int, num_envs: int
                       ) -> np.ndarray:
    """The replay slots among a collector's envs ``[env_offset, env_offset + num_envs)``."""
    return demo_slots(total_envs, fraction)[env_offset:env_offset + num_envs]


@torch.no_grad()
def replayed_log_probs(actor: ActorCritic, rollouts: Sequence[Rollout],
                       slots: np.ndarray) -> None:
    """Write into each rollout's ``log_probs`` the log-probabilities of the replayed actions
    under ``actor`` as it is (the update's starting weights), in the replay slots ``slots``
    (global). Collectors sampled their own actions there and stored those actions' log-probs;
    the demonstrated action is what the env slot took."""
    for r in rollouts:
        cols = np.flatnonzero(slots[r.env_offset:r.env_offset + r.layout.num_envs])
        if not cols.size:
            continue
        t = r.valid_steps
        obs = torch.from_numpy(np.ascontiguousarray(r.obs[:t, cols])).flatten(0, 1)
        actions = torch.from_numpy(np.ascontiguousarray(r.actions[:t, cols])).flatten(0, 1)
        if actor.integer_actions:
            actions = actions.long()
        device = next(actor.parameters()).device
        log_probs, _, _ = actor.evaluate(obs.to(device), actions.to(device))
        r.log_probs[:t, cols] = log_probs.view(t, len(cols)).cpu().numpy()


def demos_problem(path: str, observation_space: gym.Space, action_space: gym.Space
                  ) -> str | None:
    """Why the demonstrations of ``path`` cannot be replayed in this env (no such file, not
    the format, observations or actions of other shapes, other keys), or None."""
    try:
        arrays = read_demos(path)
    except FileNotFoundError:
        return (f"config key 'algo.ppo.demos': no file '{path}' (a relative path is taken from "
                f"the directory hpcrl runs in, {Path.cwd()})")
    except (OSError, ValueError) as err:
        return f"config key 'algo.ppo.demos' ({path}): {err}"
    obs = file_obs(arrays)

    def mismatch(where: str, rows: Any, space: gym.Space) -> str | None:
        if isinstance(space, gym.spaces.Dict):
            if not isinstance(rows, dict) or set(rows) != set(space.spaces):
                return (f"{where} holds keys {sorted(rows) if isinstance(rows, dict) else []}"
                        f" where the env observes a Dict of {sorted(space.spaces)}")
            return next((m for k in space.spaces for m in
                         [mismatch(f"{where}/{k}", rows[k], space.spaces[k])] if m), None)
        if isinstance(space, gym.spaces.Tuple):
            if not isinstance(rows, tuple) or len(rows) != len(space.spaces):
                return f"{where} is no Tuple of {len(space.spaces)} parts, as the env observes"
            return next((m for i, sub in enumerate(space.spaces) for m in
                         [mismatch(f"{where}/{i}", rows[i], sub)] if m), None)
        shape = tuple(np.shape(rows)[1:])
        if isinstance(rows, (dict, tuple)) or shape != tuple(space.shape or ()):
            return (f"{where} rows have shape {shape} where the env's are "
                    f"{tuple(space.shape or ())}")
        return None

    problem = (mismatch("obs", obs, observation_space)
               or mismatch("actions", arrays["actions"], action_space))
    if problem:
        return (f"config key 'algo.ppo.demos' ({path}): the demonstrations do not fit this env: "
                f"{problem}; record them in the same env (hpcrl eval RUN --record FILE)")
    return None


class DemoPlay:
    """PPO+D's declared play (a :class:`~hpcrl.envs.scripted.SlotPlay`): a fraction
    ``own.demos_fraction`` of the job's ``total_envs`` slots replays the demonstrations of
    ``own.demos`` (and the agent's best own episodes, ``own.demos_own``)."""

    def __init__(self, own: Any, total_envs: int) -> None:
        self.own, self.total_envs = own, total_envs

    def slots(self, env_offset: int, num_envs: int) -> np.ndarray:
        """The replay slots among a collector's envs."""
        return slots_of_collector(self.total_envs, self.own.demos_fraction, env_offset,
                                  num_envs)

    def wrap(self, real: gym.vector.VectorEnv, slots: np.ndarray) -> DemoSlots:
        """The real envs and the replay slots, over the demonstration file's buffer."""
        return DemoSlots(real, slots, DemoBuffer.from_file(self.own.demos, self.own.demos_own))

    def problem(self, observation_space: gym.Space, action_space: gym.Space) -> str | None:
        """Why the demonstration file does not fit the env, or None."""
        return demos_problem(self.own.demos, observation_space, action_space)
