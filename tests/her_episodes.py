"""Hindsight-replay fixtures shared by tests in different folders (tests/buffers/test_her.py,
tests/envs/test_env_restarts.py): a point-reach replay, and episodes whose achieved goals
are known step by step."""
from __future__ import annotations

import numpy as np

from hpcrl.buffers.replay.goals import GoalCodec, GoalRewards
from hpcrl.buffers.replay.her import HerReplayBuffer
from hpcrl.envs.obs_format import obs_format
from hpcrl.sections.schema import EnvConfig
from hpcrl.tasks.point_reach import ENV_ID, PointReach

DIM = 2
SPACE = PointReach(dim=DIM).observation_space
FMT = obs_format(SPACE)
CODEC = GoalCodec(FMT)


def pack(pos: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Carried Dict rows of points ``pos [N, 2]`` and goals ``goal [N, 2]``."""
    return FMT.carry({"observation": pos, "achieved_goal": pos, "desired_goal": goal})


def replay(strategy: str, capacity: int = 64, streams: int = 2, k: int = 4,
           seed: int = 0) -> HerReplayBuffer:
    return HerReplayBuffer(capacity, FMT, (DIM,), seed, streams, strategy, k, 0.99,
                           GoalRewards(EnvConfig(id=ENV_ID)))


def episode(stream_steps: int, start: float, goal: float, end_last: bool = True):
    """Steps of a stream whose point after step t is ``start + t + 1`` (both coordinates)
    and whose goal is ``goal``: obs, actions, rewards, discounts, next_obs, ends."""
    t = np.arange(stream_steps, dtype=np.float32)
    here = np.repeat((start + t)[:, None], DIM, axis=1)
    after = here + 1.0
    goals = np.full((stream_steps, DIM), goal, np.float32)
    ends = np.zeros(stream_steps, bool)
    ends[-1] = end_last
    return (pack(here, goals), np.zeros((stream_steps, DIM), np.float32),
            np.full(stream_steps, -1.0, np.float32), np.full(stream_steps, 0.99, np.float32),
            pack(after, goals), ends)


def achieved_after(buf: HerReplayBuffer, stream: int, step: int) -> float:
    row = buf.rows_of(stream, step)
    return float(CODEC.read(buf.observations.next_obs[[row]], "achieved_goal")[0, 0])
