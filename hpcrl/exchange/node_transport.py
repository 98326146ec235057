"""Which of a job's per-step exchanges go through the node's shared memory.

Two exchanges carry big fixed-size buffers all the time: a collector's stream of rollouts
(or transition chunks) to its gradient worker, and, with inference ranks, its observations
and actions to and from its inference rank. When the two ranks of an exchange are on one
node (and ``scheme.transport`` is not ``messages``), the collector owns a region of the
node's shared window for it (:class:`~hpcrl.comm.node_memory.NodeMemory`):

* ``stream``: :data:`STREAM_SLOTS` step buffers the collector fills in turn and its learner
  reads in place, the rollout's small header travelling as the "ready" message;
* ``acting``: one slot per group of its envs (:mod:`hpcrl.exchange.acting_slots`): the request
  and reply records and the sequence numbers that say which side may read, so that no
  message crosses at all.

Every rank derives every region's size from the config, so the readers find them without
being told; the plan is made once, in :func:`open_node_memory`, collectively at job set-up.
Across nodes, and where the node's ``/dev/shm`` has no room for the regions
(``transport=auto``: with a warning), messages carry everything as before.
"""
from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.comm.node_memory import NodeMemory, NodePeers, aligned, node_peers, shm_free_bytes
from hpcrl.exchange.remote_acting import acting_spec
from hpcrl.exchange.streams import STREAM_SLOTS, StreamIn, StreamOut
from hpcrl.runtime.refused import exit_if_any_rank_refuses
from hpcrl.scheme import COLLECTOR, RankRole
from hpcrl.sections.schema import SchemeConfig

if TYPE_CHECKING:  # annotations only
    from hpcrl.comm.channel import Channel

STREAM, ACTING = "stream", "acting"


class ExchangeJob(Protocol):
    """What the node's exchanges read of a rank's job (a
    :class:`~hpcrl.placement.job.RankJob`): who talks to whom (the rank table, this rank's
    role and its gradient workers), how (the scheme's transport, the channel and codec, the
    node's shared window) and the sizes of what crosses (the stream layout, the acting
    policy and its env groups). Declared here, where it is used, so that the exchanges
    depend on these parts and not on the placement that assembles them."""

    world: Any
    role: RankRole
    table: list[RankRole]
    memory: NodeMemory | None
    transport_note: str | None
    survives: bool

    @property
    def rank(self) -> int:
        """This rank in the world."""

    @property
    def channel(self) -> Channel:
        """The channel every message of the roles goes through."""

    @property
    def codec(self) -> Any:
        """How streamed buffers are packed for messages (``scheme.compress``)."""

    @property
    def scheme(self) -> SchemeConfig:
        """The ``scheme`` section (``transport``, ``compress``)."""

    @property
    def is_leader(self) -> bool:
        """Whether this is rank 0, which says the transport line."""

    @property
    def workers(self) -> list[int]:
        """The gradient workers' ranks, by group."""

    @property
    def env_groups(self) -> int:
        """The groups a collecting rank cuts its envs into (one acting slot each)."""

    @property
    def num_envs(self) -> int:
        """The envs of one collecting rank."""

    @property
    def wiring(self) -> Any:
        """The algorithm family's wiring (its acting spec)."""

    def describe(self) -> str:
        """This rank in words, for a refusal."""

    def stream_layout(self) -> Any:
        """The layout of one buffer a collector streams."""

    def new_policy(self) -> Any:
        """A fresh acting policy (its shapes size the acting slots)."""


def stream_bytes(job: ExchangeJob) -> int:
    """Bytes of one step buffer of what a collector streams (its float32 words x 4)."""
    return job.stream_layout().data_size * 4


def acting_bytes(job: ExchangeJob) -> int:
    """Bytes of a collector's acting slots, one per group of its envs."""
    spec = acting_spec(job, acting_module(job))
    groups = job.env_groups
    return groups * spec.slot_words(job.num_envs // groups) * 4


def acting_module(job: ExchangeJob) -> Any:
    """The module whose acting a collector's inference rank runs (on the CPU, for shapes):
    the job's acting policy."""
    return job.new_policy()


def collector_regions(job: ExchangeJob, peers: NodePeers) -> dict[str, int]:
    """The regions this rank owns: a collector's for each exchange whose peer shares its
    node (nothing for any other role)."""
    role = job.role
    if role.role != COLLECTOR:
        return {}
    regions = {}
    if peers.shares(job.workers[role.group]):
        regions[STREAM] = STREAM_SLOTS * stream_bytes(job)
    if role.inference >= 0 and peers.shares(role.inference):
        regions[ACTING] = acting_bytes(job)
    return regions


def straddling(job: ExchangeJob, peers: NodePeers) -> str | None:
    """Why ``scheme.transport=shared`` cannot hold for this rank (a peer of its exchanges on
    another node), or None."""
    role = job.role
    if role.role != COLLECTOR:
        return None
    for peer, what in ((job.workers[role.group], "its gradient worker"),
                       (role.inference, "its inference rank")):
        if peer >= 0 and not peers.shares(peer):
            return (f"scheme.transport=shared, but {what} (rank {peer}) is on another node, "
                    f"which shared memory cannot reach; set scheme.transport=auto (shared "
                    f"memory within a node, messages across) or place the ranks on one node")
    return None


def _region(job: ExchangeJob, owner: int, name: str) -> Any:
    """``owner``'s region ``name`` of the node's window, or None (messages carry it)."""
    return None if job.memory is None else job.memory.region(owner, name)


def stream_out(job: ExchangeJob, layout: Any, synchronous: bool = False) -> StreamOut:
    """A collector's end of its stream to its learner: in its region of the node's window
    where it has one, else as messages through the job's channel and codec."""
    return StreamOut(job.channel, job.workers[job.role.group], layout, job.codec,
                     _region(job, job.rank, STREAM), job.memory, synchronous, job.rank)


def stream_in(job: ExchangeJob, source: int, layout: Any) -> StreamIn:
    """A learner's end of collector ``source``'s stream (in that collector's region of the
    node's window where it has one, else as messages)."""
    return StreamIn(job.channel, source, layout, job.codec, _region(job, source, STREAM),
                    job.memory)


def uses_exchanges(job: ExchangeJob) -> bool:
    """Whether any rank of the job collects for another through shared memory (the same
    answer on every rank). A job that survives lost collectors takes messages under
    ``transport=auto``: Open MPI does not promise its shared windows work after a rank died,
    and freeing one is collective over the node, dead ranks included."""
    transport = job.scheme.transport
    if transport == "messages" or (transport == "auto" and job.survives):
        return False
    return job.world.Get_size() > 1 and any(r.role == COLLECTOR for r in job.table)


def open_node_memory(job: ExchangeJob) -> NodeMemory | None:
    """The node's shared window with this job's regions, or None when messages carry every
    exchange. Collective over the world (every rank calls it in :func:`build_job`); every
    rank exits with status 2 when ``transport=shared`` cannot hold somewhere."""
    if not uses_exchanges(job):
        return None

    peers = node_peers(job.world)
    regions = collector_regions(job, peers)
    shared = job.scheme.transport == "shared"
    problem = straddling(job, peers) if shared else None
    need = sum(peers.comm.allgather(sum(aligned(n) for n in regions.values())))
    free = peers.comm.bcast(shm_free_bytes() if peers.comm.Get_rank() == 0 else None, root=0)
    if need and free is not None and need > free:
        room = (f"/dev/shm on {socket.gethostname()} has {free / 2**20:.0f} MiB free, the "
                f"shared-memory regions of this node's collectors need {need / 2**20:.0f} MiB")
        if shared:
            problem = problem or (f"scheme.transport=shared, but {room}; give the node (the "
                                  f"container: docker --shm-size) more /dev/shm, or set "
                                  f"scheme.transport=auto or messages")
        else:
            regions = {}  # every rank of the node takes this branch: none keeps a region
            if peers.comm.Get_rank() == 0:
                print(f"hpcrl: warning: {room}; the ranks of this node exchange rollouts as "
                      f"messages (give it more /dev/shm for shared memory)", file=sys.stderr,
                      flush=True)
    exit_if_any_rank_refuses(job.world, problem, job.describe())
    memory = NodeMemory(peers, job.rank, regions)
    owned = job.world.gather((tuple(regions), memory.total_bytes if peers.comm.Get_rank() == 0
                              else 0), root=0)
    if job.is_leader:
        job.transport_note = transport_note(job, [names for names, _ in owned],
                                            sum(nbytes for _, nbytes in owned))
    return memory


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def _exchanges(streams: list[int], acts: list[int]) -> str:
    """'the rollouts of collector ranks 1, 2 and the acting of 1, 2', as far as any."""
    parts = []
    if streams:
        parts.append(f"the rollouts of collector ranks {_ranks(streams)}")
    if acts:
        parts.append(f"the acting of {_ranks(acts)}" if streams
                     else f"the acting of collector ranks {_ranks(acts)}")
    return " and ".join(parts)


def transport_note(job: ExchangeJob, owned: list[tuple[str, ...]], total_bytes: int) -> str:
    """One line for the leader to print: which collectors' exchanges go through shared
    memory and which as messages (their peer on another node, or no room in /dev/shm)."""
    collectors = [r for r in job.table if r.role == COLLECTOR]
    acting = [r for r in collectors if r.inference >= 0]
    shared = _exchanges([r.rank for r in collectors if STREAM in owned[r.rank]],
                        [r.rank for r in acting if ACTING in owned[r.rank]])
    messaged = _exchanges([r.rank for r in collectors if STREAM not in owned[r.rank]],
                          [r.rank for r in acting if ACTING not in owned[r.rank]])
    lines = []
    if shared:
        lines.append(f"shared memory carries {shared} ({total_bytes / 2**20:.1f} MiB of "
                     f"/dev/shm)")
    if messaged:
        lines.append(f"messages carry {messaged} (their peer on another node, or no room in "
                     f"/dev/shm)")
    elif job.scheme.compress == "lz4":
        lines.append("scheme.compress=lz4 compresses the weights alone here: no rollout "
                     "crosses as a message")
    return "; ".join(lines)
