"""Non-blocking buffer transfers and the non-spinning waits."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hpcrl.comm import Poll, irecv, isend, probe_any, wait, wait_any, wait_probe, world_comm

DELAY_S = 0.5


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_buffer_arrives_intact_and_wait_does_not_spin() -> None:
    comm = world_comm()
    payload = np.arange(4 * 257, dtype=np.float32).reshape(4, 257) * 0.5
    comm.Barrier()
    if comm.rank == 0:
        buf = np.zeros_like(payload)
        request = irecv(comm, buf, source=1, tag=11)
        wall, cpu = time.perf_counter(), time.process_time()
        envelope = wait(request)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        np.testing.assert_array_equal(buf, payload)
        assert (envelope.source, envelope.tag, envelope.nbytes) == (1, 11, payload.nbytes)
        assert wall >= 0.8 * DELAY_S
        # A spinning wait would burn ~DELAY_S of CPU; the back-off uses a few ms.
        assert cpu < 0.2 * DELAY_S, f"wait used {cpu:.3f} s of CPU in {wall:.3f} s"
    else:
        time.sleep(DELAY_S)
        wait(isend(comm, payload, dest=0, tag=11))


@pytest.mark.parallel(2)
@pytest.mark.timeout(60)
def test_wait_any_and_probe() -> None:
    comm = world_comm()
    other = 1 - comm.rank
    bufs = [np.zeros(3, dtype=np.int64) for _ in range(2)]
    requests = [irecv(comm, bufs[k], source=other, tag=k) for k in range(2)]
    wait(isend(comm, np.full(3, 7, dtype=np.int64), other, tag=1))
    first = wait_any(requests)
    comm.Barrier()
    wait(isend(comm, np.full(3, 5, dtype=np.int64), other, tag=0))
    second = wait_any(requests)

    # probe: a message of 6 float64s with tag 3, probed before it is received
    comm.Barrier()
    send = isend(comm, np.ones(6), other, tag=3)
    envelope = wait_probe(comm, tag=3)
    buf = np.empty(envelope.nbytes // 8)
    wait(irecv(comm, buf, source=envelope.source, tag=envelope.tag))
    wait(send)
    comm.Barrier()
    nothing = probe_any(comm, tag=3)

    assert first[0] == 1 and first[1].source == other and first[1].tag == 1
    assert second[0] == 0 and second[1].tag == 0
    assert bufs[0].tolist() == [5, 5, 5] and bufs[1].tolist() == [7, 7, 7]
    assert (envelope.source, envelope.tag, envelope.nbytes) == (other, 3, 48)
    assert buf.tolist() == [1.0] * 6
    assert nothing is None


# ---- single-process checks -------------------------------------------------


def test_wait_times_out_and_leaves_request_usable() -> None:
    comm = world_comm()
    request = irecv(comm, np.zeros(2), source=0, tag=99)
    with pytest.raises(TimeoutError):
        wait(request, timeout=0.05)
    request.Cancel()
    request.Wait()
    with pytest.raises(TimeoutError):
        wait_probe(comm, tag=98, timeout=0.02)


def test_self_send_and_wait_any_with_no_active_request() -> None:
    comm = world_comm()
    buf = np.zeros(5)
    recv = irecv(comm, buf, source=0, tag=1)
    wait(isend(comm, np.arange(5.0), 0, 1))
    assert wait_any([recv])[0] == 0
    assert buf.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="no active request"):
        wait_any([recv])


def test_buffers_are_checked() -> None:
    comm = world_comm()
    with pytest.raises(ValueError, match="C-contiguous"):
        isend(comm, np.zeros((4, 4))[:, 0], 0, 0)
    with pytest.raises(TypeError, match="numpy array"):
        isend(comm, [1.0, 2.0], 0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tag"):
        isend(comm, np.zeros(2), 0, -1)
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        irecv(comm, frozen)


def test_poll_validation() -> None:
    with pytest.raises(ValueError):
        Poll(initial_s=0.01, max_s=0.001)
    with pytest.raises(ValueError):
        Poll(growth=0.5)
