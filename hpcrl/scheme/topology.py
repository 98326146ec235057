"""Roles on ranks: one pure function from (world size, scheme) to the rank table.

It feeds ``hpcrl plan``, the MPI launcher, the Slurm renderer and the world-size check, so
they can never disagree. Ranks are laid out learners first (the updater, then the gradient
workers), then the inference ranks (which sit beside the learners, on the GPU nodes), then
the collectors, grouped by the worker they feed: a Slurm heterogeneous job puts its GPU
component first, and consecutive ranks share a node.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hpcrl.errors import ExplainedError
from hpcrl.sections.schema import SchemeConfig

UPDATER, WORKER, COLLECTOR = "updater", "gradient_worker", "collector"
INFERENCE = "inference"
SPARE = "spare"  # idle until it takes a lost collector's place (scheme.max_collector_restarts)
EVALUATOR = "evaluator"  # evaluates rank 0's newest weights (scheme.evaluators)


class WorldSizeError(ExplainedError, ValueError):
    """The job was launched with a number of ranks the scheme cannot use."""


@dataclass(frozen=True)
class RankRole:
    """One rank's part in the job."""

    rank: int
    role: str
    group: int                      # index of its gradient worker (-1: the updater)
    feeds: tuple[int, ...]          # ranks it sends its output to
    fed_by: tuple[int, ...]         # ranks it receives input from
    collects: bool                  # holds environments
    learner: bool                   # sits on the learner device (updater, gradient workers)
    env_offset: int = 0             # global index of its first env (collecting ranks)
    num_envs: int = 0
    inference: int = -1             # a collector's inference rank, which acts for it (-1: itself)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The role as plain data (tuples as lists, ``extra`` left out), for ``hpcrl plan``."""
        d = asdict(self)
        d["feeds"], d["fed_by"] = list(self.feeds), list(self.fed_by)
        d.pop("extra")
        return d


def has_updater(scheme: SchemeConfig) -> bool:
    """Whether the scheme has a dedicated updater rank (``scheme.update=central``)."""
    return scheme.update == "central"


def collecting_ranks(scheme: SchemeConfig) -> int:
    """Ranks that hold envs: each worker itself, or its dedicated collectors."""
    return scheme.gradient_workers * max(scheme.collectors_per_worker, 1)


def spare_ranks(scheme: SchemeConfig) -> int:
    """Spare ranks the job starts with: one per lost collector it may replace
    (``scheme.max_collector_restarts``; only asynchronous collection goes on without one)."""
    if scheme.collection != "async" or scheme.collectors_per_worker < 1:
        return 0
    return max(scheme.max_collector_restarts, 0)


def required_world_size(scheme: SchemeConfig) -> int:
    """Ranks the scheme needs: updater + gradient workers + inference ranks + collectors
    + spares + evaluators."""
    return (int(has_updater(scheme)) + scheme.gradient_workers + scheme.inference_ranks
            + scheme.gradient_workers * scheme.collectors_per_worker + spare_ranks(scheme)
            + max(scheme.evaluators, 0))


def inference_groups(collectors: list[int], per_worker: int) -> list[list[int]]:
    """A gradient worker's collectors split into ``per_worker`` contiguous groups (sizes
    differing by at most one), one per inference rank: neighbouring ranks share a node."""
    base, extra = divmod(len(collectors), per_worker)
    groups, start = [], 0
    for i in range(per_worker):
        size = base + int(i < extra)
        groups.append(collectors[start:start + size])
        start += size
    return groups


def assign_roles(world_size: int, scheme: SchemeConfig, num_envs: int,
                 launcher: str = "mpiexec") -> list[RankRole]:
    """The role of every rank; ``num_envs`` is ``env.num_envs`` (envs per collecting rank).
    ``launcher`` is what the wrong-size message tells the user to start ``-n N`` ranks with
    (``mpiexec``, or the job's ``srun`` inside a Slurm allocation)."""
    need = required_world_size(scheme)
    if world_size != need:
        raise WorldSizeError(
            f"the scheme needs {need} ranks ({describe(scheme)}) but the job has "
            f"{world_size}; launch it with `{launcher} -n {need}` or change "
            f"scheme.gradient_workers / scheme.collectors_per_worker / "
            f"scheme.inference_ranks / scheme.update / scheme.max_collector_restarts / "
            f"scheme.evaluators")
    g, k = scheme.gradient_workers, scheme.collectors_per_worker
    per_worker = scheme.inference_ranks // g if scheme.inference_ranks > 0 else 0
    first_worker = int(has_updater(scheme))
    updater = 0 if has_updater(scheme) else None
    workers = [first_worker + i for i in range(g)]
    first_inference = first_worker + g
    first_collector = first_inference + g * per_worker
    collectors = {i: [first_collector + i * k + j for j in range(k)] for i in range(g)}
    served: dict[int, tuple[int, list[int]]] = {}  # inference rank -> (group, its collectors)
    for i in range(g):
        for j, group in enumerate(inference_groups(collectors[i], per_worker) if per_worker
                                  else []):
            served[first_inference + i * per_worker + j] = (i, group)
    acts_on = {c: rank for rank, (_, group) in served.items() for c in group}
    table: list[RankRole] = []
    if updater is not None:
        table.append(RankRole(updater, UPDATER, -1, tuple(workers), tuple(workers),
                              collects=False, learner=True))
    for i, rank in enumerate(workers):
        up: tuple[int, ...] = () if updater is None else (updater,)
        peers = tuple(w for w in workers if w != rank) if updater is None else ()
        collects = k == 0
        table.append(RankRole(rank, WORKER, i, up + peers, tuple(collectors[i]) + up + peers,
                              collects=collects, learner=True,
                              env_offset=i * num_envs if collects else 0,
                              num_envs=num_envs if collects else 0))
    for rank, (i, group) in served.items():
        table.append(RankRole(rank, INFERENCE, i, tuple(group), (workers[i],) + tuple(group),
                              collects=False, learner=False))
    for i in range(g):
        for j, rank in enumerate(collectors[i]):
            helper = (acts_on[rank],) if rank in acts_on else ()
            table.append(RankRole(rank, COLLECTOR, i, (workers[i],) + helper,
                                  (workers[i],) + helper, collects=True, learner=False,
                                  env_offset=(i * k + j) * num_envs, num_envs=num_envs,
                                  inference=acts_on.get(rank, -1)))
    first_spare = first_collector + g * k
    for rank in range(first_spare, first_spare + spare_ranks(scheme)):
        table.append(RankRole(rank, SPARE, -1, (), (), collects=False, learner=False))
    return _with_evaluators(sorted(table, key=lambda r: r.rank), scheme.evaluators)


def _with_evaluators(table: list[RankRole], count: int) -> list[RankRole]:
    """``table`` (in rank order) with ``count`` evaluator ranks after its last rank; rank 0
    sends them its weights and takes their results."""
    first = len(table)
    evaluators = tuple(range(first, first + max(count, 0)))
    if not evaluators:
        return table
    zero = table[0]
    table[0] = replace(zero, feeds=zero.feeds + evaluators, fed_by=zero.fed_by + evaluators)
    return table + [RankRole(rank, EVALUATOR, -1, (0,), (0,), collects=False, learner=False)
                    for rank in evaluators]


def describe(scheme: SchemeConfig) -> str:
    """A one-line summary, e.g. '1 updater + 2 gradient workers + 4 collectors'."""
    parts = []
    if has_updater(scheme):
        parts.append("1 updater")
    g = scheme.gradient_workers
    parts.append(f"{g} gradient worker{'s' if g != 1 else ''}")
    n = scheme.inference_ranks
    if n > 0:
        parts.append(f"{n} inference rank{'s' if n != 1 else ''}")
    c = g * scheme.collectors_per_worker
    if c:
        parts.append(f"{c} collector{'s' if c != 1 else ''}")
    spares = spare_ranks(scheme)
    if spares:
        parts.append(f"{spares} spare{'s' if spares != 1 else ''}")
    e = scheme.evaluators
    if e > 0:
        parts.append(f"{e} evaluator{'s' if e != 1 else ''}")
    return " + ".join(parts)


def lost_collector_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.min_collectors`` or ``scheme.collector_timeout_s`` cannot hold, or None.

    A job goes on without a lost collector only where its learner never waits for one
    particular collector: asynchronous collection. A bound above 1 anywhere else would be
    a key nothing reads."""
    if s.collector_timeout_s < 0:
        return ("config key 'scheme.collector_timeout_s' must be >= 0 (seconds; 0 waits for "
                "ever)")
    if s.min_collectors < 1:
        return ("config key 'scheme.min_collectors' must be >= 1: a job with no live "
                "collector has nothing to train on")
    replaced = collector_restarts_problem(s)
    if replaced is not None:
        return replaced
    if s.min_collectors == 1:
        return None
    if s.collection != "async":
        return (f"scheme.min_collectors={s.min_collectors} applies to asynchronous collection "
                f"(scheme.collection=async: async-ppo, impala, apex, async-sac), where the "
                f"learner goes on without a lost collector; a synchronous scheme waits for "
                f"every collector and ends the job when one is lost. Drop the key or use an "
                f"asynchronous scheme")
    total = s.gradient_workers * s.collectors_per_worker
    if s.min_collectors > total:
        return (f"scheme.min_collectors={s.min_collectors} exceeds the job's "
                f"{total} collector ranks (scheme.gradient_workers x "
                f"scheme.collectors_per_worker); set it to at most {total}")
    return None


def collector_restarts_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.max_collector_restarts`` cannot hold, or None: a spare takes a lost
    collector's place only where the learners go on without it (asynchronous collection),
    talk to it alone (no inference rank, whose slots are its collectors'), and take each
    checkpoint in one step with rank 0 (synchronous gradients)."""
    n = s.max_collector_restarts
    if n < 0:
        return "config key 'scheme.max_collector_restarts' must be >= 0 (0: none replaced)"
    if n == 0:
        return None
    if s.collection != "async" or s.collectors_per_worker < 1:
        return (f"scheme.max_collector_restarts={n} replaces lost collector ranks while an "
                f"asynchronous job runs (scheme.collection=async with collector ranks: "
                f"async-ppo, impala, apex, async-sac); a synchronous scheme waits for every "
                f"collector and ends when one is lost. Drop the key or use such a scheme")
    if s.inference_ranks > 0:
        return (f"scheme.max_collector_restarts={n} cannot be used with scheme.inference_ranks:"
                f" an inference rank serves fixed slots of its collector ranks, which a spare "
                f"cannot take over; drop one of the two keys")
    if s.gradients == "async":
        return (f"scheme.max_collector_restarts={n} needs scheme.gradients=sync: with "
                f"asynchronous gradients the updater's checkpoints do not wait for a "
                f"replaced collector's learner; drop the key or use gradients=sync")
    return None


def scheme_problem(scheme: SchemeConfig, learner_device: str) -> str | None:
    """Why a scheme makes no sense, with what to use instead; None when it is usable. The
    checks run in this order, the first problem found said alone."""
    checks: tuple[Callable[[SchemeConfig], str | None], ...] = (
        _count_problem, lost_collector_problem, _preemption_fraction_problem,
        _asynchrony_problem, _preemption_problem,
        lambda s: _allreduce_problem(s, learner_device), inference_problem,
        _compress_problem, _transport_problem, _collector_device_problem, evaluators_problem)
    for check in checks:
        problem = check(scheme)
        if problem is not None:
            return problem
    return None


def _count_problem(s: SchemeConfig) -> str | None:
    """Why the counts of ranks and of the policy lag cannot hold, or None."""
    if s.gradient_workers < 1:
        return "config key 'scheme.gradient_workers' must be >= 1"
    if s.collectors_per_worker < 0:
        return "config key 'scheme.collectors_per_worker' must be >= 0 (0: workers collect)"
    if s.max_policy_lag < 0:
        return "config key 'scheme.max_policy_lag' must be >= 0"
    return None


def _preemption_fraction_problem(s: SchemeConfig) -> str | None:
    """Why a fraction of ``scheme.preemption`` lies outside (0, 1], or None."""
    p = s.preemption
    for key, value in (("fraction_workers", p.fraction_workers),
                       ("fraction_samples", p.fraction_samples)):
        if not 0.0 < value <= 1.0:
            return f"config key 'scheme.preemption.{key}' must lie in (0, 1], got {value}"
    return None


def _asynchrony_problem(s: SchemeConfig) -> str | None:
    """Why asynchronous gradients or collection cannot run as the scheme says, or None."""
    if s.gradients == "async" and s.update == "decentralized":
        return ("scheme.gradients=async with scheme.update=decentralized makes no sense: "
                "asynchronous gradients are applied one by one as they arrive, which needs an "
                "updater rank; use scheme.update=central (A3C), or scheme.gradients=sync for "
                "an all-reduce among gradient workers")
    if s.collection == "async" and s.collectors_per_worker == 0:
        return ("scheme.collection=async needs dedicated collector ranks: with "
                "scheme.collectors_per_worker=0 each gradient worker collects itself, "
                "synchronously; set scheme.collectors_per_worker >= 1")
    return None


def _preemption_problem(s: SchemeConfig) -> str | None:
    """Why straggler preemption (a fraction of ``scheme.preemption`` below 1) cannot work
    in this scheme, or None."""
    p = s.preemption
    if not (p.fraction_workers < 1.0 or p.fraction_samples < 1.0):
        return None
    if s.collection == "async":
        return ("scheme.preemption applies to synchronous collection only: asynchronous "
                "collection never waits for stragglers; drop the preemption keys or use "
                "scheme.collection=sync")
    if s.collectors_per_worker == 0 and s.gradients == "async":
        return ("scheme.preemption needs a synchronous collection step: with "
                "scheme.gradients=async each gradient worker collects on its own; use "
                "dedicated collectors (scheme.collectors_per_worker >= 1) or gradients=sync")
    group = s.collectors_per_worker if s.collectors_per_worker else s.gradient_workers
    if group < 2:
        return ("scheme.preemption needs at least 2 collecting ranks to wait for: with one "
                "there is no straggler to preempt; raise scheme.gradient_workers or "
                "scheme.collectors_per_worker, or drop the preemption keys")
    return None


def _allreduce_problem(s: SchemeConfig, learner_device: str) -> str | None:
    """Why ``scheme.allreduce`` cannot run on the learners' ``train.device``, or None."""
    if s.allreduce == "nccl" and not learner_device.startswith(("cuda", "auto")):
        return ("scheme.allreduce=nccl needs the gradient workers on GPUs; set "
                "train.device=cuda (or auto), or use scheme.allreduce=gloo|mpi|auto on CPUs")
    return None


def _compress_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.compress`` has nothing to compress or cannot run here, or None."""
    if s.compress != "lz4":
        return None
    from hpcrl.comm.compression import lz4_problem

    if s.collectors_per_worker == 0 and s.gradients != "async":
        return ("scheme.compress=lz4 compresses the rollouts and weights that cross ranks "
                "as messages, and this scheme sends none: its gradient workers collect "
                "their own rollouts and share gradients by all-reduce (or weights by "
                "broadcast); drop scheme.compress, or use it with collector ranks "
                "(scheme.collectors_per_worker >= 1) or asynchronous workers (a3c)")
    return lz4_problem()


def _transport_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.transport`` has no rollout to move, or None."""
    if s.transport == "shared" and s.collectors_per_worker == 0:
        return ("scheme.transport=shared moves collectors' rollouts through shared memory, "
                "but with scheme.collectors_per_worker=0 the gradient workers collect "
                "themselves and no rollout crosses ranks; drop scheme.transport (or set "
                "scheme.collectors_per_worker >= 1)")
    return None


def _collector_device_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.collector_device`` names no device, or None."""
    if s.collector_device not in ("cpu", "cuda") and not s.collector_device.startswith("cuda:"):
        return (f"config key 'scheme.collector_device' must be 'cpu', 'cuda' or 'cuda:N', got "
                f"{s.collector_device!r}")
    return None


def evaluators_problem(s: SchemeConfig) -> str | None:
    """Why ``scheme.evaluators`` cannot be used, or None: evaluator ranks are ranks of an
    MPI job beside its learners, so a scheme of one rank (a serial run, which evaluates in
    rank 0's thread) has no place for them."""
    n = s.evaluators
    if n < 0:
        return "config key 'scheme.evaluators' must be >= 0 (0: rank 0 evaluates in a thread)"
    if n > 0 and required_world_size(s) - n == 1:
        return (f"scheme.evaluators={n} adds ranks to an MPI job, but this scheme is one "
                f"process (a serial run: its evaluations during training run in a thread, "
                f"train.eval_every); drop scheme.evaluators or use a scheme of several ranks "
                f"(a preset such as a2c, async-ppo, apex or dd-ppo)")
    return None


def inference_problem(scheme: SchemeConfig) -> str | None:
    """Why ``scheme.inference_ranks`` / ``scheme.inference_device`` cannot be used, or None."""
    s, n = scheme, scheme.inference_ranks
    device = s.inference_device.strip().lower()
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        return (f"config key 'scheme.inference_device' must be 'auto', 'cpu', 'cuda' or "
                f"'cuda:N', got {s.inference_device!r}")
    if n < 0:
        return "config key 'scheme.inference_ranks' must be >= 0 (0: collectors act themselves)"
    if n == 0:
        return None
    if s.collectors_per_worker == 0:
        return ("scheme.inference_ranks acts for dedicated collector ranks, but with "
                "scheme.collectors_per_worker=0 the gradient workers collect (and act) "
                "themselves; set scheme.collectors_per_worker >= 1 (or a preset with "
                "collectors: a2c, async-ppo, impala, apex, async-sac), or drop "
                "scheme.inference_ranks")
    if n % s.gradient_workers:
        return (f"scheme.inference_ranks={n} must be a multiple of scheme.gradient_workers="
                f"{s.gradient_workers}: each inference rank serves collectors of one gradient "
                f"worker (whose weights it acts with)")
    if s.collector_device.strip().lower() != "cpu":
        return (f"scheme.collector_device={s.collector_device} has no effect with "
                f"scheme.inference_ranks={n}: the inference ranks act for the collectors; "
                f"put them on the GPU with scheme.inference_device, and drop "
                f"scheme.collector_device")
    if n // s.gradient_workers > s.collectors_per_worker:
        return (f"scheme.inference_ranks={n} gives each gradient worker {n // s.gradient_workers}"
                f" inference ranks for {s.collectors_per_worker} collectors; use at most one "
                f"per collector (scheme.inference_ranks <= "
                f"{s.gradient_workers * s.collectors_per_worker})")
    return None


def gradient_step_factors(scheme: SchemeConfig, num_envs: int) -> list[tuple[str, int]]:
    """The factors of :func:`envs_per_gradient_step`, each with the key that sets it (a
    factor of 1 left out but the first), so a message can name every one."""
    factors = [("env.num_envs", num_envs)]
    if scheme.collectors_per_worker > 1:
        factors.append(("scheme.collectors_per_worker", scheme.collectors_per_worker))
    if scheme.gradients != "async" and scheme.gradient_workers > 1:
        factors.append(("scheme.gradient_workers", scheme.gradient_workers))
    return factors


def envs_per_gradient_step(scheme: SchemeConfig, num_envs: int) -> int:
    """Envs whose steps one gradient step covers: the whole job's when gradients are
    synchronous, one worker's share when each worker's gradient is applied on its own."""
    return math.prod(value for _, value in gradient_step_factors(scheme, num_envs))
