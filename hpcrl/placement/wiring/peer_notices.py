"""A DD-PPO worker's count of its peers' notices that they finished an update's rollout.

With preemption (``scheme.preemption``) a worker stops collecting once enough peers said
they finished; it asks at every env step past its minimum share, so the count must cost
the same whatever the number of workers (:class:`PeerNotices`)."""
from __future__ import annotations

import numpy as np

from hpcrl.comm.buffers import poll_until
from hpcrl.comm.channel import Channel
from hpcrl.exchange.protocol import TAG_DONE


class PeerNotices:
    """The notices "I finished update ``update``'s rollout" of a DD-PPO worker's ``peers``
    peers, counted at a cost that does not grow with the workers: a test is one probe for a
    notice from any peer, and each notice found is received from the peer the probe names.

    Why not simpler: a receive from each peer, each tested at every env step, cost (p - 1)
    tests a step (``benchmarks/notice_poll.py`` measures both); one standing ``ANY_SOURCE`` receive
    loses notices under MPICH 5.0.2 (ch4, shared memory beside a network module) when it is
    posted after notices from peers on its own node and on another already arrived (a
    receive matched on both sides, one message dropped: docs/scaling.md), which hung DD-PPO
    across two Slurm nodes. A probe receives nothing, so no message can be lost to it.

    Every notice found is this update's: no peer starts the next update before this one's
    all-reduce, which this worker enters only once it took every peer's notice."""

    def __init__(self, channel: Channel, peers: int, update: int) -> None:
        self.channel, self.peers, self.update = channel, peers, update
        self.box = np.zeros(1, np.int64)
        self.arrived = 0

    def count(self) -> int:
        """The peers' notices arrived so far (one probe when none is pending)."""
        while self.arrived < self.peers:
            envelope = self.channel.probe(None, TAG_DONE)
            if envelope is None:
                break
            self.channel.wait(self.channel.irecv(self.box, envelope.source, TAG_DONE))
            if int(self.box[0]) != self.update:
                raise RuntimeError(f"rank {envelope.source}'s notice of update "
                                   f"{int(self.box[0])} came during update {self.update}: "
                                   "the workers are out of step")
            self.arrived += 1
        return self.arrived

    def wait_all(self) -> None:
        """Wait, polling without spinning, until every peer's notice arrived."""
        poll_until(lambda: True if self.count() >= self.peers else None,
                   what="the peers' notices that they finished the update's rollout")
