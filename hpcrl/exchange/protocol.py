"""What crosses ranks besides the role messages: tags, the per-update report and control.

Every per-update message is a fixed-size named-field record (:mod:`hpcrl.numerics.records`)
crossing as one numpy buffer, so nothing on the hot path is pickled. Only checkpoint-time
collector states (a few kB, once per checkpoint) are.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# point-to-point tags, one per kind of message
TAG_ROLLOUT, TAG_WEIGHTS, TAG_GRAD, TAG_GRAD_INFO, TAG_PREEMPT, TAG_DONE = 1, 2, 3, 4, 5, 6
TAG_FINAL, TAG_STATE, TAG_REPORT = 7, 8, 9
TAG_ACT, TAG_ACTED = 10, 11  # a collector's request to its inference rank, and the reply
# rank 0 to a spare rank: the lost collector whose place it takes (or None: the job ends);
# rank 0 to a learner: which spare took the place of which lost collector of its
TAG_ASSIGN, TAG_REPLACED = 12, 13
# a rank whose env failed for good, to rank 0: its line naming the rank, the env and the
# env's last error (pickled; the job then checkpoints and stops)
TAG_ENV_FAILED = 14
# rank 0 to an evaluator rank: weights to evaluate (on TAG_WEIGHTS); an evaluator to rank 0:
# the result of one evaluation (:data:`EVAL_RESULT_FIELDS`, float64), or its leaving
TAG_EVAL = 15
#: an evaluator's result message: the weights version it played (-1: it leaves), the mean
#: and spread of the return, the episodes, how many of them were cut and where
EVAL_RESULT_FIELDS = ("version", "mean_return", "std_return", "episodes", "truncated",
                      "max_episode_steps")
ACTING_TAGS_FROM = 100  # a group's acting request and reply: tags 100 + 2g and 101 + 2g


def acting_tags(group: int) -> tuple[int, int]:
    """The tags of group ``group``'s acting request and reply (messages across nodes)."""
    return ACTING_TAGS_FROM + 2 * group, ACTING_TAGS_FROM + 2 * group + 1


# control decided by the leader after each update: the collectors' command bits
from hpcrl.exchange.messages import (  # noqa: E402,F401
    CHECKPOINT,
    COLLECT,
    ENV_FAILED,
    PREEMPTED,
    STOP,
)
from hpcrl.numerics.records import Record, RecordLayout, scalar_fields  # noqa: E402

REPORT_FIELDS = ("env_steps", "episodes", "return_sum", "length_sum", "policy_lag",
                 "time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s",
                 "dropped_rollouts", "gradients", "applied", "grad_norm_sum", "learning_rate",
                 "skipped_updates", "live_collectors", "starved_learners", "env_restarts",
                 "env_failures")


class Report(Record):
    """One gradient worker's figures of an update (a record of :class:`ReportLayout`): the
    fields of :data:`REPORT_FIELDS`, declared for the type checker (float64 scalars, views of
    the record's buffer); the loss terms that follow are named by the algorithm, so they are
    read by key (``report[name]``)."""

    env_steps: np.ndarray
    episodes: np.ndarray
    return_sum: np.ndarray
    length_sum: np.ndarray
    policy_lag: np.ndarray
    time_collect_s: np.ndarray
    time_wait_s: np.ndarray
    time_compute_s: np.ndarray
    time_communicate_s: np.ndarray
    dropped_rollouts: np.ndarray
    gradients: np.ndarray
    applied: np.ndarray
    grad_norm_sum: np.ndarray
    learning_rate: np.ndarray
    skipped_updates: np.ndarray
    live_collectors: np.ndarray
    starved_learners: np.ndarray
    env_restarts: np.ndarray
    env_failures: np.ndarray


class ReportLayout(RecordLayout[Report]):
    """The record each gradient worker sends per update: one float64 field per figure
    (:data:`REPORT_FIELDS`), then one per loss term of the algorithm."""

    def __init__(self, stat_names: tuple[str, ...]) -> None:
        super().__init__(scalar_fields(REPORT_FIELDS + tuple(stat_names)), record_type=Report)
        self.stat_names = tuple(stat_names)

    def index(self, name: str) -> str:
        """The key that addresses figure ``name`` in a report (``report[key]``)."""
        if name not in self.names:
            raise KeyError(f"no figure {name!r} in the report")
        return name

    def fill(self, report: Report, **values: float) -> Report:
        """Set the named figures of ``report``; returns it."""
        return report.set(**values)

    def fill_update(self, report: Report, rollouts: Sequence[Any], policy_lag: float,
                    t_collect: float, t_wait: float, times: dict[str, float], dropped: int,
                    learning_rate: float, live_collectors: int = 1,
                    starved: bool = False, env_failures: int = 0) -> Report:
        """The figures of one finished update: env steps, episodes, lag, time split, how
        many of the ranks that collect for this worker are live, whether it lost every
        one of them (``starved``: the job then checkpoints and stops), the envs made
        again after a failure while its rollouts were collected, and how many of the ranks
        it learns from had an env fail for good (``env_failures``: the job then checkpoints
        and stops too)."""
        finished = [r.finished_episodes() for r in rollouts]
        return report.set(env_steps=sum(r.valid_steps * r.layout.num_envs for r in rollouts),
                          episodes=sum(len(f[0]) for f in finished),
                          return_sum=sum(float(f[0].sum()) for f in finished),
                          length_sum=sum(float(f[1].sum()) for f in finished),
                          policy_lag=policy_lag, time_collect_s=t_collect, time_wait_s=t_wait,
                          time_compute_s=times["compute"], time_communicate_s=times["comm"],
                          dropped_rollouts=dropped, learning_rate=learning_rate,
                          live_collectors=live_collectors, starved_learners=float(starved),
                          env_restarts=sum(r.env_restarts for r in rollouts),
                          env_failures=env_failures)

    def add_stats(self, report: Report, sums: Sequence[float] | np.ndarray,
                  count: int = 1) -> None:
        """Accumulate the loss terms of ``count`` computed gradients (``sums``: their sums,
        in ``stat_names`` order)."""
        for name, value in zip(self.stat_names, sums, strict=True):
            report[name] += float(value)
        report.gradients += count

    def add_applied(self, report: Report, grad_norm: float) -> None:
        """Count one optimiser step this rank applied, and its gradient norm before clipping
        (a step dropped for a non-finite gradient, ``grad_norm`` NaN or inf, counts in
        ``skipped_updates``)."""
        if not math.isfinite(grad_norm):
            report.skipped_updates += 1
            return
        report.applied += 1
        report.grad_norm_sum += grad_norm

    def combine(self, reports: np.ndarray) -> dict[str, float]:
        """The job-wide figures of one update from the gathered reports (one row each).

        ``grad_norm`` is the mean, over the optimiser steps applied in the update, of the
        gradient's norm before clipping (the same figure in every placement).
        """
        records = self.rows(reports)
        col = {name: np.array([r.value(name) for r in records]) for name in self.names}
        computed = col["gradients"] > 0
        if computed.any():  # ranks that computed gradients (not an updater's own row)
            col_g = {name: values[computed] for name, values in col.items()}
        else:
            col_g = col
        grads = np.maximum(col_g["gradients"], 1)
        out = {name: float(col[name].sum()) for name in
               ("env_steps", "episodes", "return_sum", "length_sum", "dropped_rollouts",
                "live_collectors", "starved_learners", "env_restarts", "env_failures")}
        out.update(policy_lag=float(col_g["policy_lag"].mean()),
                   grad_norm=float(col["grad_norm_sum"].sum() / max(col["applied"].sum(), 1)),
                   learning_rate=float(col_g["learning_rate"].mean()),
                   # every decentralised worker drops the same steps; elsewhere one rank applies
                   skipped_updates=float(col["skipped_updates"].max()))
        for name in ("time_collect_s", "time_wait_s", "time_compute_s", "time_communicate_s"):
            out[name] = float(col_g[name].mean())
        for name in self.stat_names:
            out[name] = float((col_g[name] / grads).mean())
        return out


class Control(Record):
    """What the leader decides after each update and every learner rank receives: the
    command bits (``COLLECT``, ``CHECKPOINT``, ``STOP``, ``PREEMPTED``, ``ENV_FAILED``) and
    the job's env
    steps so far (int64 scalars, views of the record's buffer)."""

    command: np.ndarray
    env_steps: np.ndarray


CONTROL_LAYOUT = RecordLayout(scalar_fields(("command", "env_steps"), np.int64),
                              record_type=Control)


SCHEME_KEYS = ("policy_lag", "dropped_rollouts", "time_collect_s", "time_wait_s", "time_compute_s",
               "time_communicate_s", "live_collectors", "env_restarts")


def update_row(figures: dict[str, float], stat_names: Sequence[str],
               gradient_asynchrony: float = 0.0
               ) -> tuple[int, tuple[float, float, float], dict[str, float], dict[str, float]]:
    """The arguments of :meth:`~hpcrl.learning.run_writer.RunWriter.add_update` for the
    combined figures of one update: env steps, episodes, optimiser and scheme figures."""
    stats = {name: figures[name] for name in stat_names}
    stats.update(grad_norm=figures["grad_norm"], learning_rate=figures["learning_rate"],
                 skipped_updates=figures["skipped_updates"])
    scheme = {key: figures[key] for key in SCHEME_KEYS}
    scheme["gradient_asynchrony"] = gradient_asynchrony
    return (int(figures["env_steps"]),
            (figures["episodes"], figures["return_sum"], figures["length_sum"]), stats, scheme)
