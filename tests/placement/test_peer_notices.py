"""A DD-PPO worker counts its peers' preemption notices with one probe a test, whatever the
number of peers, receives each from the peer the probe names, and refuses one of another
update."""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hpcrl.comm.buffers import Envelope
from hpcrl.exchange.protocol import TAG_DONE
from hpcrl.placement.wiring.peer_notices import PeerNotices


class NoticeChannel:
    """A channel whose pending notices are ``(source, update)`` pairs; counts its calls."""

    def __init__(self) -> None:
        self.pending: deque[tuple[int, int]] = deque()
        self.probes = 0
        self.received_from: list[int] = []

    def probe(self, source: int | None = None, tag: int | None = None) -> Envelope | None:
        assert source is None and tag == TAG_DONE
        self.probes += 1
        return Envelope(self.pending[0][0], TAG_DONE, 8) if self.pending else None

    def irecv(self, buf: np.ndarray, source: int | None = None, tag: int | None = None
              ) -> int:
        assert source is not None, "a notice is received from a named peer, never any"
        index = next(i for i, (s, _) in enumerate(self.pending) if s == source)
        buf[0] = self.pending[index][1]
        del self.pending[index]
        self.received_from.append(source)
        return source

    def wait(self, request: int) -> Envelope:
        return Envelope(request, TAG_DONE, 8)


def test_a_test_without_notices_is_one_probe_whatever_the_peers() -> None:
    for peers in (3, 127, 1023):
        channel = NoticeChannel()
        notices = PeerNotices(channel, peers, update=5)  # type: ignore[arg-type]
        for _ in range(10):
            assert notices.count() == 0
        assert channel.probes == 10


def test_notices_are_taken_from_the_probed_peers_and_counted() -> None:
    channel = NoticeChannel()
    notices = PeerNotices(channel, 3, update=2)  # type: ignore[arg-type]
    channel.pending.extend([(4, 2), (1, 2)])
    assert notices.count() == 2
    assert channel.received_from == [4, 1]
    channel.pending.append((7, 2))
    notices.wait_all()
    assert notices.count() == 3 and not channel.pending
    probes = channel.probes
    assert notices.count() == 3 and channel.probes == probes  # all in: no probe any more


def test_a_notice_of_another_update_is_refused() -> None:
    channel = NoticeChannel()
    notices = PeerNotices(channel, 2, update=3)  # type: ignore[arg-type]
    channel.pending.append((1, 4))
    with pytest.raises(RuntimeError, match="out of step"):
        notices.count()
