"""The acting exchange's slots (hpcrl.exchange.acting_slots), both ends in one process: a request
posted is seen once by the server, its reply once by the collector, in shared memory (here a
plain array both ends map, as the node's window is mapped by two ranks) and as messages (the
in-process channel). The ranks' use of them is tested under mpiexec in
tests/placement/mpi/test_inference_ranks.py and tests/placement/mpi/test_node_transport.py."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hpcrl.comm.channel import LocalChannel
from hpcrl.exchange.acting_slots import (
    BYE,
    STEP,
    MessageServerSlot,
    MessageSlot,
    SharedServerSlot,
    SharedSlot,
    actor_critic_spec,
)
from hpcrl.exchange.remote_acting import client_ends, server_ends


class _Actor:
    """What actor_critic_spec reads of an actor: categorical actions, no state."""

    recurrent, state_size, integer_actions = False, 0, True

    class distribution:  # noqa: N801
        @staticmethod
        def noise_shape() -> tuple[int, ...]:
            return ()


SPEC = actor_critic_spec(_Actor(), (4, 84, 84), "uint8", ())
ENVS = 3


def no_fence() -> None:
    """One process: its stores are its own loads' (x86 and the GIL order them)."""


def shared_pair() -> tuple[SharedSlot, SharedServerSlot]:
    words = np.zeros(SPEC.slot_words(ENVS), np.float32)
    return SharedSlot(SPEC, ENVS, words, no_fence), SharedServerSlot(SPEC, ENVS, words, no_fence)


def message_pair() -> tuple[MessageSlot, MessageServerSlot]:
    channel = LocalChannel()
    server = MessageServerSlot(SPEC, ENVS, channel, 0, (100, 101))
    return MessageSlot(SPEC, ENVS, channel, 0, (100, 101)), server


PAIRS = {"shared": shared_pair, "messages": message_pair}


@pytest.mark.parametrize("make", PAIRS.values(), ids=list(PAIRS))
def test_each_request_is_served_once_and_each_reply_read_once(make):
    client, server = make()
    assert not server.ready()
    for k in range(5):
        client.request.obs[:] = k
        client.request.noise[:] = 0.5 + k
        client.request.set(method=STEP, version=k)
        client.post()
        assert server.ready() and server.ready()  # asked twice: still the one request
        assert int(server.request.version) == k and (server.request.obs == k).all()
        assert not client.ready()  # no reply yet
        server.reply.actions[:] = np.arange(ENVS) + k
        server.reply.set(version=k)
        server.answer()
        assert not server.ready()
        reply = client.wait()
        assert int(reply.version) == k and list(reply.actions) == [k, k + 1, k + 2]
    client.request.set(version=9)
    client.leave()
    assert server.ready() and int(server.request.method) == BYE
    server.consume()
    assert not server.ready()
    server.close()


def test_a_shared_slot_hands_requests_between_threads_in_order():
    """The collector in one thread, the server in another: every reply answers its own
    request, none is lost or seen twice."""
    client, server = shared_pair()
    rounds = 300
    served: list[int] = []

    def serve() -> None:
        while len(served) < rounds:
            if server.ready():
                served.append(int(server.request.version))
                server.reply.actions[:] = int(server.request.version)
                server.reply.set(version=int(server.request.version))
                server.answer()
            else:
                time.sleep(0)  # let the collector's thread run (the GIL)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    for k in range(rounds):
        client.request.set(method=STEP, version=k)
        client.post()
        reply = client.wait()
        assert int(reply.version) == k and (reply.actions == k).all()
    thread.join(timeout=10)
    assert served == list(range(rounds))


def test_each_group_of_a_collector_has_its_own_slot_in_the_region():
    groups = 2
    region = np.zeros(groups * SPEC.slot_words(ENVS) * 4, np.uint8)
    clients = client_ends(LocalChannel(), 0, SPEC, ENVS, groups, _Memory(), region)
    servers = server_ends(LocalChannel(), 0, SPEC, ENVS, groups, _Memory(), region)
    clients[1].request.obs[:] = 7
    clients[1].request.set(method=STEP)
    clients[1].post()
    assert servers[1].ready() and not servers[0].ready()
    assert (servers[1].request.obs == 7).all() and not servers[0].request.obs.any()
    with pytest.raises(RuntimeError, match="different acting specs"):
        client_ends(LocalChannel(), 0, SPEC, ENVS + 1, groups, _Memory(), region)


class _Memory:
    """The node's window, as the ends use it: its fence."""

    def fence(self) -> None:
        pass
