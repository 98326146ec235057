"""The links a job's ranks talk over, and what a message or an all-reduce costs on them.

Each figure is an all-reduce *bus bandwidth* as nccl-tests reports it (``busbw``: the
algorithm bandwidth times 2(p - 1)/p for an all-reduce, so one number describes a link
whatever the rank count; NVIDIA/nccl-tests, doc/PERFORMANCE.md) for large messages, and a
latency per step of a collective. They are typical published figures for each kind of
node and network (docs/scaling.md lists them and where they come from), not measurements of
your cluster: a run's own timings, given as a calibration, replace what they can.

The cost of an all-reduce of ``n`` bytes over ``p`` ranks is the ring's traffic, 2(p - 1)/p
of the gradient, over the bus bandwidth, plus a latency of 2 ceil(log2 p) steps (NCCL's
trees, which it picks for the small messages where latency matters).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class Network:
    """A kind of node and the network between nodes: NVLink inside a node, ``nics`` network
    adapters of ``nic_busbw`` bytes/s each between nodes (a node's bandwidth grows with its
    adapters as NCCL runs one ring per adapter), and the latency of one step on each."""

    name: str
    intra_busbw: float       # bytes/s, all-reduce bus bandwidth among a node's GPUs
    intra_latency_s: float   # seconds per collective step inside a node
    nic_busbw: float         # bytes/s, bus bandwidth one network adapter carries
    nics: int                # adapters per node (at most one per GPU is used)
    latency_s: float         # seconds per collective step across nodes
    summary: str             # the node and network in words, and where the figures come from

    def node_busbw(self, gpus_per_node: int) -> float:
        """The bus bandwidth of an all-reduce that spans nodes of ``gpus_per_node`` GPUs:
        their adapters' sum (one per GPU at most), or NVLink's where that is lower."""
        adapters = max(min(self.nics, gpus_per_node), 1)
        return min(self.intra_busbw, adapters * self.nic_busbw)


# typical all_reduce_perf bus bandwidths at large sizes (docs/scaling.md: Link figures)
NETWORKS: dict[str, Network] = {
    "ib-edr": Network("ib-edr", 130 * GB, 4e-6, 10.5 * GB, 4, 6e-6,
                      "V100 nodes (NVLink 2), InfiniBand EDR 100 Gb/s, 4 adapters a node"),
    "ib-hdr": Network("ib-hdr", 230 * GB, 4e-6, 23 * GB, 8, 5e-6,
                      "A100 nodes (NVSwitch), InfiniBand HDR 200 Gb/s, one adapter a GPU"),
    "ib-ndr": Network("ib-ndr", 450 * GB, 4e-6, 46 * GB, 8, 5e-6,
                      "H100 nodes (NVSwitch), InfiniBand NDR 400 Gb/s, one adapter a GPU"),
    "roce-100g": Network("roce-100g", 230 * GB, 4e-6, 10.5 * GB, 1, 10e-6,
                         "A100 nodes (NVSwitch), one 100 Gb/s Ethernet adapter with RoCE"),
    "ethernet-25g": Network("ethernet-25g", 230 * GB, 4e-6, 2.4 * GB, 1, 40e-6,
                            "A100 nodes (NVSwitch), one 25 Gb/s Ethernet adapter, NCCL's "
                            "TCP sockets"),
    # measured on the 2-core development machine: gloo over TCP loopback, 2 ranks
    # (docs/benchmarks.md, benchmarks/allreduce.py: 1e6 floats in 6025 us, 1e3 in 357 us)
    "tcp-local": Network("tcp-local", 0.66 * GB, 178e-6, 0.66 * GB, 1, 178e-6,
                         "CPU ranks, gloo over TCP loopback as measured on the 2-core "
                         "development machine"),
}
DEFAULT_NETWORK = "ib-hdr"


def network(name: str) -> Network:
    """The network called ``name``; a ValueError lists the known ones."""
    try:
        return NETWORKS[name]
    except KeyError:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}") from None


def allreduce_seconds(nbytes: float, ranks: int, gpus_per_node: int, net: Network) -> float:
    """Seconds of one all-reduce of ``nbytes`` over ``ranks`` GPUs, ``gpus_per_node`` a node:
    latency of 2 ceil(log2 p) steps plus 2(p - 1)/p of the bytes over the bus bandwidth
    (NVLink's inside one node, the network's once the ranks span nodes)."""
    if ranks <= 1:
        return 0.0
    if ranks <= gpus_per_node:
        busbw, latency = net.intra_busbw, net.intra_latency_s
    else:
        busbw, latency = net.node_busbw(gpus_per_node), net.latency_s
    steps = 2 * math.ceil(math.log2(ranks))
    return steps * latency + 2 * (ranks - 1) / ranks * nbytes / busbw


def collective_latency_seconds(ranks: int, gpus_per_node: int, net: Network) -> float:
    """Seconds of a small collective (a gather of per-rank reports, a broadcast of the
    leader's decision) over ``ranks`` ranks: a tree's 2 ceil(log2 p) steps of latency."""
    if ranks <= 1:
        return 0.0
    latency = net.intra_latency_s if ranks <= gpus_per_node else net.latency_s
    return 2 * math.ceil(math.log2(ranks)) * latency
