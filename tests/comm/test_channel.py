"""The in-process channel keeps MPI's point-to-point rules, and the roles' protocols run over
it unchanged: a collector's stream of rollouts and newest-weights delivery, in one process,
end with the bytes that were sent (what the MPI tests check across ranks)."""
from __future__ import annotations

import numpy as np
import pytest

from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.comm import SelfComm
from hpcrl.comm.channel import LocalChannel, MpiChannel, channel_for
from hpcrl.comm.compression import make_codec
from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env
from hpcrl.exchange.latest_weights import LatestWeights, ParamsReceiver
from hpcrl.exchange.messages import CHECKPOINT, Weights
from hpcrl.exchange.protocol import TAG_WEIGHTS
from hpcrl.exchange.streams import StreamIn, StreamOut


def test_messages_of_a_tag_arrive_in_order_whichever_side_comes_first() -> None:
    ch = LocalChannel()
    early = np.zeros(3, np.int64)
    posted = ch.irecv(early, 0, tag=7)  # a receive posted before its send
    assert not ch.test(posted) and ch.probe(tag=7) is None
    ch.isend(np.array([1, 2, 3]), 0, 7)
    assert ch.test(posted) and early.tolist() == [1, 2, 3]
    sent = np.array([4, 5, 6])
    ch.isend(sent, 0, 7)
    sent[:] = 0  # the sender may reuse its buffer at once: the message was taken as it was
    ch.isend(np.array([7, 8, 9]), 0, 7)
    ch.isend(np.array([1.5]), 0, 3)
    envelope = ch.probe(tag=7)
    assert envelope is not None and (envelope.tag, envelope.nbytes) == (7, 24)
    first, second, other = np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(1)
    ch.wait(ch.irecv(other, tag=3))
    assert ch.wait(ch.irecv(first, tag=7)).nbytes == 24
    ch.wait(ch.irecv(second, None, None))  # any tag: the oldest message left
    assert first.tolist() == [4, 5, 6] and second.tolist() == [7, 8, 9] and other[0] == 1.5


def test_a_synchronous_send_completes_only_once_received() -> None:
    ch = LocalChannel()
    send = ch.isend(np.ones(2, np.float32), 0, 1, synchronous=True)
    assert not ch.test(send)
    ch.wait(ch.irecv(np.zeros(2, np.float32), 0, 1))
    assert ch.test(send)


def test_objects_travel_pickled_and_are_probed_by_tag() -> None:
    ch = LocalChannel()
    state = {"rngs": [1, 2], "obs": np.arange(3)}
    ch.isend_object(state, 0, 11)
    state["rngs"].append(3)  # pickled when sent, as MPI does
    assert ch.probe(0, 11) is not None and ch.probe(0, 12) is None
    got = ch.recv_object(0, 11)
    assert got["rngs"] == [1, 2] and got["obs"].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="wait forever"):
        ch.recv_object(0, 11)


def test_what_cannot_complete_in_one_process_fails_at_once() -> None:
    ch = LocalChannel()
    pending = ch.irecv(np.zeros(1), 0, 5)
    with pytest.raises(RuntimeError, match="wait forever"):
        ch.wait(pending)
    with pytest.raises(TimeoutError):
        ch.wait(pending, timeout=0.01)
    with pytest.raises(RuntimeError, match="wait forever"):
        ch.wait_any([pending])
    ch.cancel(pending)
    ch.isend(np.ones(1), 0, 5)  # the cancelled receive takes nothing
    assert ch.probe(tag=5) is not None
    with pytest.raises(ValueError, match="rank 0 alone"):
        ch.isend(np.ones(1), 1, 5)
    with pytest.raises(ValueError, match="does not fit"):
        ch.irecv(np.zeros(0), 0, 5)


def test_wait_any_reports_each_completed_request_once_and_lets_idle_send() -> None:
    ch = LocalChannel()
    boxes = [np.zeros(1) for _ in range(3)]
    requests = [ch.irecv(box, 0, tag) for tag, box in enumerate(boxes)]
    sends = iter([2, 0])

    def idle() -> None:  # the caller's own progress between polls: here, the sends
        tag = next(sends, None)
        if tag is not None:
            ch.isend(np.array([10.0 + tag]), 0, tag)

    assert ch.wait_any(requests, idle=idle)[0] == 2
    assert ch.wait_any(requests, idle=idle)[0] == 0
    assert boxes[2][0] == 12.0 and boxes[0][0] == 10.0
    with pytest.raises(TimeoutError):
        ch.wait_any(requests, timeout=0.01)


def test_a_job_of_one_process_talks_in_process() -> None:
    assert isinstance(channel_for(SelfComm()), LocalChannel)
    assert isinstance(channel_for(object()), MpiChannel)


@pytest.mark.parametrize("compress", ["none", "lz4"])
def test_a_collectors_stream_of_rollouts_runs_over_the_in_process_channel(compress) -> None:
    config = from_dict({}, ["env.num_envs=2", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
                                  "env.normalize_obs=true"])
    spaces = env_spaces(config)
    layout = rollout_layout(config, spaces, 2)
    channel, codec = LocalChannel(), make_codec(compress)
    out, into = StreamOut(channel, 0, layout, codec), StreamIn(channel, 0, layout, codec)
    envs = make_vector_env(config.env, 2)
    collector = rollout_collector(envs, make_actor(config, spaces), config.env,
                                  config.algo.gamma, config.seed)
    sent = []
    for _ in range(3):  # more messages than the stream has buffers
        head = into.post()
        rollout = collector.collect(out.next_buffer())
        sent.append((rollout.data.copy(), rollout.header.copy()))
        requests = out.send(rollout)
        channel.wait(head)
        got = into.take()
        for request in requests:
            channel.wait(request)
        np.testing.assert_array_equal(got.data, sent[-1][0])
        np.testing.assert_array_equal(got.header, sent[-1][1])
    envs.close()
    assert not np.array_equal(sent[0][0], sent[1][0])


def test_newest_weights_delivery_runs_over_the_in_process_channel() -> None:
    channel = LocalChannel()
    weights = Weights.new(64, 1)
    sender = LatestWeights(channel, [0])
    received = Weights.new(64, 1)
    params = ParamsReceiver(channel, received, 0, make_codec("none"))
    for version, command in ((1, 0), (2, CHECKPOINT)):
        weights.params[:] = version
        weights.header.set(command=command, version=version)
        sender.offer(weights, block=False)
        channel.wait(channel.irecv(received.header.data, 0, TAG_WEIGHTS))
        channel.wait(params.post())
        params.unpack()
        assert (received.version, received.command) == (version, command)
        assert np.all(received.params == version)
    sender.drain()
