"""The cost model: order statistics, link costs, update splits, and DD-PPO's published 0.84."""
import math

import pytest

from hpcrl.scheme.cost_model import Calibration, Overheads, Shape, predict, scaling_curve
from hpcrl.scheme.links import NETWORKS, allreduce_seconds, network
from hpcrl.scheme.stragglers import expected_maximum, order_statistic, synchronous_collection

DDPPO = Shape(fraction_workers=0.6, fraction_samples=0.25)


def test_blom_order_statistics_of_the_normal():
    # Blom: the expected maximum of 2 standard normals is z(1.625 / 2.25) = 0.5895 (exact:
    # 1 / sqrt(pi) = 0.5642); of 128 it is z(127.625 / 128.25) = 2.5847
    assert expected_maximum(2, 10.0, 0.1) == pytest.approx(10.0 * (1 + 0.1 * 0.58946), 1e-4)
    assert expected_maximum(128, 1.0, 0.2) == pytest.approx(1 + 0.2 * 2.58469, 1e-4)
    assert order_statistic(1, 3, 1.0, 0.1) == pytest.approx(2 - expected_maximum(3, 1.0, 0.1))
    assert order_statistic(5, 9, 2.0, 0.3) == 2.0  # the median
    assert expected_maximum(1, 3.0, 0.5) == 3.0
    with pytest.raises(ValueError):
        order_statistic(4, 3, 1.0, 0.1)


def test_preemption_cuts_the_wait_and_the_stragglers_steps():
    full = synchronous_collection(100, 1.0, 0.2)
    assert full.wall_s == expected_maximum(100, 1.0, 0.2) and full.collected == 1.0
    cut = synchronous_collection(100, 1.0, 0.2, fraction_workers=0.6, fraction_samples=0.25)
    assert cut.wall_s == pytest.approx(order_statistic(60, 100, 1.0, 0.2))
    # the 40 stragglers keep told / their time of their steps
    told = cut.wall_s
    kept = sum(min(1.0, told / order_statistic(k, 100, 1.0, 0.2)) for k in range(1, 101))
    assert cut.collected == pytest.approx(kept / 100)
    assert 0.9 < cut.collected < 1.0
    # fraction_samples binds once the slowest needs longer for its share than the others
    late = synchronous_collection(10, 1.0, 0.3, fraction_workers=0.1, fraction_samples=0.9)
    assert late.wall_s == pytest.approx(0.9 * expected_maximum(10, 1.0, 0.3))


def test_ring_allreduce_moves_two_thirds_of_the_gradient_on_three_ranks():
    net = network("ib-hdr")
    # inside a node: NVLink, 2 ceil(log2 3) = 4 latency steps, 2 (3 - 1) / 3 of 1 GB
    assert allreduce_seconds(1e9, 3, 8, net) == pytest.approx(
        4 * net.intra_latency_s + (4 / 3) * 1e9 / net.intra_busbw)
    # across nodes of 8: 8 HDR adapters of 23 GB/s (below NVSwitch's 230)
    assert allreduce_seconds(1e9, 16, 8, net) == pytest.approx(
        8 * net.latency_s + (30 / 16) * 1e9 / (8 * 23e9))
    # a node of 4 GPUs uses 4 adapters
    assert net.node_busbw(4) == pytest.approx(4 * 23e9)
    assert allreduce_seconds(1e9, 1, 8, net) == 0.0
    with pytest.raises(ValueError, match="known: ib-edr"):
        network("carrier-pigeon")


def test_ddppo_update_split_adds_up():
    cal = Calibration(512, 2.0, 0.2, 1.0, 4e7, 4)
    p = predict(DDPPO, cal, 64, 8, NETWORKS["ib-hdr"])
    assert p.update_s == pytest.approx(p.collect_s + p.straggler_s + p.compute_s
                                       + p.communicate_s)
    assert p.communicate_s == pytest.approx(p.allreduce_s + p.coordination_s)
    assert p.frames_per_s == pytest.approx(64 * 512 * p.collected / p.update_s)
    one = predict(DDPPO, cal, 1, 8, NETWORKS["ib-hdr"])
    assert one.efficiency == 1.0 and one.straggler_s == 0.0 and one.communicate_s == 0.0
    assert p.efficiency == pytest.approx(p.frames_per_s / (64 * one.frames_per_s))


def test_asynchronous_collection_waits_for_no_straggler():
    cal = Calibration(1024, 1.0, 0.5, 0.2, 4e6, 1, rollout_bytes=28e6)
    shape = Shape(collectors_per_worker=3, asynchronous=True)
    p = predict(shape, cal, 128, 8, NETWORKS["ib-ndr"])
    assert p.straggler_s == 0.0 and p.update_s == pytest.approx(1.0)
    assert p.limiting == "collector ranks (env steps)"
    # the same layout, synchronous, waits for the slowest of 384 collectors
    sync = predict(Shape(collectors_per_worker=3), cal, 128, 8, NETWORKS["ib-ndr"])
    assert sync.straggler_s == pytest.approx(expected_maximum(384, 1.0, 0.5) - 1.0)


def test_ddppo_notices_grow_linearly_once_an_update_and_their_probes_stay_flat():
    cal = Calibration(1024, 0.1, 0.0, 0.05, 4e6, 1, vector_steps=128)
    over = Overheads(per_peer_notice_s=1e-5, notice_probe_s=2e-6, report_s=0.0)
    net = NETWORKS["ib-hdr"]
    small, large = (predict(DDPPO, cal, n, 8, net, over) for n in (64, 512))
    latency = [2 * math.ceil(math.log2(n)) * net.latency_s for n in (64, 512)]
    # probes once it has its minimum share: the last (1 - fraction_samples) of its steps
    probes = 128 * (1 - DDPPO.fraction_samples) * 2e-6
    assert small.coordination_s - latency[0] == pytest.approx(63 * 2 * 1e-5 + probes)
    assert large.coordination_s - latency[1] == pytest.approx(511 * 2 * 1e-5 + probes)


# DD-PPO (Wijmans et al., ICLR 2020) as its paper and code give it: 4 envs x 128 steps a
# GPU, 2 epochs x 2 minibatches (4 all-reduces an update) of a ResNet50 (half width) + 2-layer
# LSTM policy of about 12.5M parameters, ~160 steps/s a V100 (2.5e9 steps in ~6 GPU-months),
# 8 V100s a node, 60 % preemption; the spread of rollout times is not given (docs/scaling.md)
DDPPO_PAPER = Calibration(steps_per_collection=512, collect_s=2.4, collect_cv=0.45,
                          compute_s=0.8, grad_bytes=4 * 12.5e6, allreduces=4)


def test_ddppo_published_scaling_at_128_gpus():
    p = predict(DDPPO, DDPPO_PAPER, 128, 8, NETWORKS["ib-edr"])
    assert p.efficiency == pytest.approx(0.84, abs=0.05)  # 107x on 128 GPUs
    # without preemption the same spread would cost far more
    waiting = predict(Shape(), DDPPO_PAPER, 128, 8, NETWORKS["ib-edr"])
    assert waiting.efficiency < 0.6


def test_scaling_curve_covers_1_to_1024_gpus():
    curve = scaling_curve(DDPPO, DDPPO_PAPER, 8, NETWORKS["ib-hdr"])
    assert [p.gpus for p in curve] == [2 ** i for i in range(11)]
    assert curve[0].efficiency == 1.0
    # 2 ranks at 60 %: both are waited for (ceil(1.2) = 2), as without preemption
    assert curve[1].straggler_s == pytest.approx(expected_maximum(2, 2.4, 0.45) - 2.4)
    # past one node the wait is the 60th percentile's, flat; the notices keep growing
    assert curve[10].straggler_s == pytest.approx(curve[7].straggler_s, abs=0.01)
    assert curve[10].coordination_s > curve[7].coordination_s


def test_checkpoints_cost_every_rank_state_amortised_over_the_updates():
    cal = Calibration(1024, 0.1, 0.0, 0.05, 4e6, 1)
    shape = Shape(collectors_per_worker=2, asynchronous=True, inference_per_worker=1)
    net = NETWORKS["ib-hdr"]
    plain = predict(shape, cal, 16, 8, net)
    every4 = predict(shape, cal, 16, 8, net, Overheads(state_s=0.01, checkpoint_every=4))
    # 16 workers, each with 2 collectors and 1 inference rank: 64 ranks' states every 4
    assert every4.coordination_s - plain.coordination_s == pytest.approx(64 * 0.01 / 4)
    assert predict(shape, cal, 16, 8, net, Overheads(state_s=0.01)).coordination_s \
        == pytest.approx(plain.coordination_s)  # checkpoint_every 0: not counted
