"""PPO: its section's keys (``algo.ppo.*``, here, torch-free: see :mod:`hpcrl.algorithms`)
and its class, :class:`~hpcrl.algorithms.ppo.clipped_surrogate.PPO`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class PpoConfig:
    """PPO's clipped surrogate and its minibatched epochs (``algo.ppo.*``)."""

    num_epochs: int = doc("Passes over each rollout.", 20)
    minibatch_size: int = doc("Samples per gradient step; must divide algo.num_steps x the "
                              "job's envs.", 256)
    clip_range: float = doc("Initial clip range of the probability ratio.", 0.2)
    clip_schedule: Literal["constant", "linear"] = doc(
        "'linear' decays the clip range to 0 over train.total_env_steps.", "linear")
    clip_range_vf: float | None = doc("Clip the value change to this range around the old "
                                      "value (null disables value clipping).", None)
    demos: str = doc(
        "PPO+D: a demonstration file (.npz, the format hpcrl eval RUN --record writes: "
        "obs, actions, rewards, terminated, truncated, one row per step, episodes back to "
        "back) whose episodes algo.ppo.demos_fraction of the job's env slots replay in every "
        "rollout, beside the agent's own best episodes (algo.ppo.demos_own). Empty: none.", "")
    demos_fraction: float = doc(
        "PPO+D: the fraction of the job's env slots that replay demonstrations instead of "
        "stepping an env (fixed slots, spread over the global env indices; every collector "
        "keeps at least one real env).", 0.25)
    demos_own: int = doc(
        "PPO+D: how many of the agent's own episodes the replay keeps beside the "
        "demonstrations: an episode joins when its return is at least the lowest of the "
        "demonstrations', evicting the worst own one (per collector; 0: none).", 8)
