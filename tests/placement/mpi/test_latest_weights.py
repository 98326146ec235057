"""Newest-weights delivery: a busy collector is caught up, a buffer in flight is never
rewritten, and a command reaches the collector exactly once."""
from __future__ import annotations

import time

import numpy as np
import pytest

from hpcrl.comm import irecv, wait, world_comm
from hpcrl.comm.channel import MpiChannel
from hpcrl.exchange.latest_weights import LatestWeights
from hpcrl.exchange.messages import CHECKPOINT, Weights
from hpcrl.exchange.protocol import TAG_WEIGHTS

NUM = 1 << 20  # 4 MB of float32: far above the eager limit, so a send waits for its receive
TAG_READY = 99  # rank 0 made its three offers: only then does the collector start taking


def weights(version: int, command: int = 0) -> Weights:
    w = Weights.new(NUM, 1)
    w.params[:] = version
    w.header.set(command=command, version=version)
    return w


def receive(comm, source: int) -> Weights:
    w = Weights.new(NUM, 1)
    wait(irecv(comm, w.header.data, source, TAG_WEIGHTS))
    wait(irecv(comm, w.params, source, TAG_WEIGHTS))
    return w


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_busy_collector_gets_the_newest_weights_and_each_command_once() -> None:
    comm = world_comm()
    if comm.rank == 0:
        sender = LatestWeights(MpiChannel(comm), [1])
        for version in (1, 2, 3):  # the collector takes none of these yet
            sender.offer(weights(version), block=False)
        comm.send(None, dest=1, tag=TAG_READY)
        while sender.behind or not all(r.Test() for r in sender.sends[1]):
            sender.push()  # what the learner does while it waits for rollouts
            time.sleep(1e-3)
        sender.offer(weights(4, CHECKPOINT), block=True)
        sender.offer(weights(5), block=False)
        while sender.behind:
            sender.push()
            time.sleep(1e-3)
        sender.drain()
        comm.Barrier()
    else:
        comm.recv(source=0, tag=TAG_READY)  # not a sleep: under load rank 0 may start late
        got = [receive(comm, 0) for _ in range(4)]
        comm.Barrier()
        # the first offer as it was sent, then straight to the newest: 2 was superseded
        assert [w.version for w in got] == [1, 3, 4, 5]
        assert [w.command for w in got] == [0, 0, CHECKPOINT, 0]
        for w in got:
            assert np.all(w.params == w.version), "a buffer was rewritten while in flight"
