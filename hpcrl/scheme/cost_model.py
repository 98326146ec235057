"""A cost model of one update at scale: frames/s, the update's time split and weak-scaling
efficiency of a scheme on N GPUs, from a calibration of one rank's costs.

Every gradient worker sits on its own GPU (weak scaling: each brings the same envs and the
same batch), its collector ranks (if any) on the CPUs of its node. One update costs:

- *collection*: a collecting rank filling its rollout (:class:`Calibration`), plus, with
  inference ranks, one acting round trip a step;
- *straggler wait*: in a synchronous step, the expected slowest of the ranks waited for
  beyond the mean, cut by DD-PPO's preemption (:mod:`hpcrl.scheme.stragglers`);
- *compute*: the gradient worker's gradients and optimiser steps;
- *communication*: the gradient all-reduces (:mod:`hpcrl.scheme.links`), the per-update
  reports and decisions of rank 0, rollouts and weights between a worker and its
  collectors, and DD-PPO's preemption notices: each worker sends every peer one an update
  (linear in the workers, once an update) and looks for its peers' with one probe a step
  once it has its minimum share (flat in the workers: docs/scaling.md); where
  :class:`Overheads` says how often and at what cost, the checkpoints (every rank's state
  gathered on rank 0, amortised over the updates between two).

Asynchronous collection overlaps collecting with learning, so its update takes the longer
of the two and never waits for a straggler. Each figure is marked as measured (it came
from a run's own timings) or modelled (from :mod:`~hpcrl.scheme.links` or a default).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from hpcrl.scheme.links import Network, allreduce_seconds, collective_latency_seconds
from hpcrl.scheme.stragglers import synchronous_collection
from hpcrl.sections.schema import SchemeConfig

GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Calibration:
    """One rank's costs of one update, on one GPU.

    ``measured`` names the fields taken from a run (the others are modelled)."""

    steps_per_collection: int  # env steps one collecting rank fills per rollout
    collect_s: float           # seconds a collecting rank takes to fill it
    collect_cv: float          # spread of that time across ranks (std / mean)
    compute_s: float           # seconds a gradient worker computes and applies per update
    grad_bytes: float          # bytes of one gradient (= of the weights)
    allreduces: int            # gradient all-reduces per update (epochs x minibatches)
    rollout_bytes: float = 0.0  # bytes of one collector's rollout
    vector_steps: int = 128    # steps of its vector env a rollout takes (algo.num_steps)
    measured: frozenset[str] = frozenset()
    source: str = "modelled"


@dataclass(frozen=True)
class Overheads:
    """What hpcrl's own protocol costs per update beside compute and the all-reduce, as
    measured by the emulation (benchmarks/scaling.py; the defaults are its figures on the
    development machine: docs/scaling.md)."""

    per_peer_notice_s: float = 5e-6     # a DD-PPO worker's notice to one peer, and its reply
    notice_probe_s: float = 0.4e-6      # its one look for any peer's notice, a step once it
    #                                     has its minimum share (benchmarks/notice_poll.py)
    per_collector_s: float = 300e-6     # a learner's handling of one collector (in and out)
    local_bandwidth: float = 5e9        # bytes/s between ranks of one node
    act_roundtrip_s: float = 60e-6      # a collector's acting request and reply, a step
    report_s: float = 50e-6             # rank 0's gather of reports and its decision
    # a checkpoint: rank 0 gathers every rank's state and writes it, ``state_s`` a rank,
    # once every ``checkpoint_every`` updates (0: not counted; the cost is the ranks' states
    # and the filesystem's, which no default knows: benchmarks/scaling.py fits it)
    state_s: float = 0.0
    checkpoint_every: int = 0


@dataclass(frozen=True)
class Shape:
    """What the model needs of a scheme (one gradient worker per GPU): its collector ranks
    per worker, whether collection is asynchronous, inference ranks per worker, and the
    preemption fractions."""

    collectors_per_worker: int = 0
    asynchronous: bool = False
    inference_per_worker: int = 0
    fraction_workers: float = 1.0
    fraction_samples: float = 1.0

    @property
    def preempting(self) -> bool:
        """Whether stragglers are cut short (DD-PPO's preemption)."""
        return self.fraction_workers < 1.0 or self.fraction_samples < 1.0


def shape_of(scheme: SchemeConfig) -> Shape:
    """The :class:`Shape` of a ``scheme`` section."""
    workers = max(scheme.gradient_workers, 1)
    p = scheme.preemption
    return Shape(scheme.collectors_per_worker, scheme.collection == "async",
                 scheme.inference_ranks // workers, p.fraction_workers, p.fraction_samples)


@dataclass(frozen=True)
class Prediction:
    """The model's figures for one layout: env steps per second, one update's wall time
    and its split (seconds), the share of steps collected, and efficiency against one GPU
    and against one node."""

    gpus: int
    nodes: int
    frames_per_s: float
    update_s: float
    collect_s: float
    straggler_s: float
    compute_s: float
    communicate_s: float
    allreduce_s: float
    coordination_s: float
    collected: float
    limiting: str
    efficiency: float = 1.0
    node_efficiency: float = 1.0
    split: dict[str, float] = field(default_factory=dict)


def _update(shape: Shape, cal: Calibration, gpus: int, gpus_per_node: int, net: Network,
            over: Overheads) -> Prediction:
    """The figures of one update on ``gpus`` GPUs, efficiencies left at 1."""
    k = shape.collectors_per_worker
    nodes = -(-gpus // gpus_per_node)
    collect = cal.collect_s + (_acting(cal, over) if shape.inference_per_worker else 0.0)
    allreduce = cal.allreduces * allreduce_seconds(cal.grad_bytes, gpus, gpus_per_node, net)
    coordination = (collective_latency_seconds(gpus, gpus_per_node, net) + over.report_s
                    if gpus > 1 else 0.0)
    if k:  # rollouts in and weights out, one collector after the other
        coordination += k * (over.per_collector_s
                             + (cal.rollout_bytes + cal.grad_bytes) / over.local_bandwidth)
    elif shape.preempting and gpus > 1:
        # every worker tells every peer it finished, and looks for its peers' notices with
        # one probe a step once it has its minimum share (hpcrl/placement/wiring/
        # peer_notices.py, PeerNotices): flat in the workers
        probed = cal.vector_steps * (1.0 - shape.fraction_samples)
        coordination += ((gpus - 1) * 2 * over.per_peer_notice_s
                         + probed * over.notice_probe_s)
    if over.checkpoint_every > 0:  # every rank's state, amortised over the updates
        ranks = gpus * (1 + k + shape.inference_per_worker)
        coordination += ranks * over.state_s / over.checkpoint_every
    waited = gpus * max(k, 1)  # ranks whose rollouts one synchronous step waits for
    steps = waited * cal.steps_per_collection
    communicate = allreduce + coordination
    if shape.asynchronous:
        learner = cal.compute_s + communicate
        update = max(collect, learner)
        straggler, collected = 0.0, 1.0
        limiting = ("collector ranks (env steps)" if collect >= learner else
                    "all-reduce" if allreduce > cal.compute_s + coordination else
                    "hpcrl coordination at the learner" if coordination > cal.compute_s else
                    "learner compute")
    else:
        step = synchronous_collection(waited, collect, cal.collect_cv, shape.fraction_workers,
                                      shape.fraction_samples)
        straggler, collected = max(step.wall_s - collect, 0.0), step.collected
        update = min(collect, step.wall_s) + straggler + cal.compute_s + communicate
        terms = {"collection (env steps)": min(collect, step.wall_s),
                 "stragglers": straggler, "learner compute": cal.compute_s,
                 "all-reduce": allreduce, "hpcrl coordination": coordination}
        limiting = max(terms, key=lambda name: terms[name])
    return Prediction(gpus, nodes, steps * collected / update, update, collect, straggler,
                      cal.compute_s, communicate, allreduce, coordination, collected, limiting,
                      split={"collection": collect, "straggler wait": straggler,
                             "compute": cal.compute_s, "communication": communicate})


def _acting(cal: Calibration, over: Overheads) -> float:
    """Seconds a collector spends per rollout on acting round trips to its inference rank
    (one a step of its envs; its steps are env steps over the envs, which the calibration
    does not know apart, so one round trip per env step is the upper bound)."""
    return cal.steps_per_collection * over.act_roundtrip_s


def predict(shape: Shape, cal: Calibration, gpus: int, gpus_per_node: int, net: Network,
            over: Overheads = Overheads()) -> Prediction:
    """The figures of ``shape`` on ``gpus`` GPUs (``gpus_per_node`` a node) over ``net``,
    with its weak-scaling efficiency against one GPU and against one node."""
    if gpus < 1 or gpus_per_node < 1:
        raise ValueError("a layout needs at least one GPU and one GPU a node")
    this = _update(shape, cal, gpus, gpus_per_node, net, over)
    one = _update(shape, cal, 1, gpus_per_node, net, over)
    node_gpus = min(gpus_per_node, gpus)
    node = _update(shape, cal, node_gpus, gpus_per_node, net, over)
    return replace(this, efficiency=this.frames_per_s / (gpus * one.frames_per_s),
                   node_efficiency=this.frames_per_s * node_gpus
                   / (gpus * node.frames_per_s))


def scaling_curve(shape: Shape, cal: Calibration, gpus_per_node: int, net: Network,
                  over: Overheads = Overheads(), gpu_counts: tuple[int, ...] = GPU_COUNTS
                  ) -> list[Prediction]:
    """:func:`predict` at each of ``gpu_counts`` (1 to 1,024 GPUs by default)."""
    return [predict(shape, cal, n, gpus_per_node, net, over) for n in gpu_counts]
