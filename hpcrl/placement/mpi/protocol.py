"""What crosses ranks besides the role messages: tags, the per-update report and control.

Every per-update message is a fixed-size numpy buffer, so nothing on the hot path is
pickled. Only checkpoint-time collector states (a few kB, once per checkpoint) are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

# point-to-point tags, one per kind of message
TAG_ROLLOUT, TAG_WEIGHTS, TAG_GRAD, TAG_GRAD_INFO, TAG_PREEMPT, TAG_DONE = 1, 2, 3, 4, 5, 6
TAG_FINAL, TAG_STATE, TAG_REPORT = 7, 8, 9

# control decided by the leader after each update: the collectors' command bits
from hpcrl.roles.messages import CHECKPOINT, COLLECT, PREEMPTED, STOP  # noqa: E402,F401

_BASE = ("env_steps", "episodes", "return_sum", "length_sum", "policy_lag", "time_collect_s",
         "time_wait_s", "time_compute_s", "time_communicate_s", "dropped_rollouts",
         "gradients", "applied", "grad_norm_sum", "learning_rate", "skipped_updates")


@dataclass
class ReportLayout:
    """Slots of the float64 report each gradient worker sends per update."""

    stat_names: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return _BASE + self.stat_names

    @property
    def size(self) -> int:
        return len(self.names)

    def new(self) -> np.ndarray:
        return np.zeros(self.size, np.float64)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def fill(self, report: np.ndarray, **values: float) -> np.ndarray:
        for key, value in values.items():
            report[self.index(key)] = value
        return report

    def fill_update(self, report: np.ndarray, rollouts: Sequence[Any], policy_lag: float,
                    t_collect: float, t_wait: float, times: dict[str, float], dropped: int,
                    learning_rate: float) -> np.ndarray:
        """The figures of one finished update: env steps, episodes, lag, time split."""
        finished = [r.finished_episodes() for r in rollouts]
        return self.fill(report, env_steps=sum(r.valid_steps * r.layout.num_envs for r in rollouts),
                         episodes=sum(len(f[0]) for f in finished),
                         return_sum=sum(float(f[0].sum()) for f in finished),
                         length_sum=sum(float(f[1].sum()) for f in finished),
                         policy_lag=policy_lag, time_collect_s=t_collect, time_wait_s=t_wait,
                         time_compute_s=times["compute"], time_communicate_s=times["comm"],
                         dropped_rollouts=dropped, learning_rate=learning_rate)

    def add_stats(self, report: np.ndarray, stats: Sequence[float]) -> None:
        """Accumulate the loss terms of one computed gradient."""
        report[len(_BASE):] += np.asarray(stats, np.float64)
        report[self.index("gradients")] += 1

    def add_applied(self, report: np.ndarray, grad_norm: float) -> None:
        """Count one optimiser step this rank applied, and its gradient norm (a step dropped
        for a non-finite gradient, ``grad_norm`` NaN or inf, counts in ``skipped_updates``)."""
        if not math.isfinite(grad_norm):
            report[self.index("skipped_updates")] += 1
            return
        report[self.index("applied")] += 1
        report[self.index("grad_norm_sum")] += grad_norm

    def combine(self, reports: np.ndarray) -> dict[str, float]:
        """The job-wide figures of one update from the rows of all gradient workers."""
        rows = reports[reports[:, self.index("gradients")] > 0]
        if rows.size == 0:
            rows = reports
        col = {name: rows[:, i] for i, name in enumerate(self.names)}
        grads = np.maximum(col["gradients"], 1)
        applied = reports[:, self.index("applied")].sum()
        out = {"env_steps": float(reports[:, 0].sum()),
               "episodes": float(reports[:, 1].sum()),
               "return_sum": float(reports[:, 2].sum()),
               "length_sum": float(reports[:, 3].sum()),
               "policy_lag": float(col["policy_lag"].mean()),
               "dropped_rollouts": float(reports[:, self.index("dropped_rollouts")].sum()),
               "grad_norm": float(reports[:, self.index("grad_norm_sum")].sum()
                                  / max(applied, 1)),
               "learning_rate": float(col["learning_rate"].mean()),
               # every decentralised worker drops the same steps; elsewhere one rank applies
               "skipped_updates": float(reports[:, self.index("skipped_updates")].max())}
        for name in ("time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s"):
            out[name] = float(col[name].mean())
        for name in self.stat_names:
            out[name] = float((col[name] / grads).mean())
        return out
