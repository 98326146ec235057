"""Declared message layouts: fields by name, moments that sum and merge exactly, commands
apart from the weights, reports that combine into the figures of progress.csv."""
import numpy as np
import torch

from hpcrl.collection.info_reducers import combine_infos
from hpcrl.exchange.messages import CHECKPOINT, STOP, Gradient, Weights
from hpcrl.exchange.protocol import ReportLayout
from hpcrl.numerics.normalization import Moments, merge_moments
from hpcrl.numerics.records import RecordLayout


def moments(rng, count, dim=3):
    x = rng.normal(size=(count, dim))
    r = rng.normal(size=(count,))
    return Moments.of(x), Moments.of(r)


def test_a_field_added_to_a_layout_moves_nothing_else_by_hand():
    base = [("a", (), np.int64), ("b", (3,), np.float64)]
    wider = RecordLayout(base[:1] + [("extra", (2, 2), np.uint8)] + base[1:])
    rec = wider.new().set(a=7, b=[1.0, 2.0, 3.0], extra=[[1, 2], [3, 4]])
    again = wider.wrap(rec.data.copy())  # what a receiver sees of the flat buffer
    assert int(again.a) == 7 and again.b.tolist() == [1.0, 2.0, 3.0]
    assert again.extra.dtype == np.uint8 and again.extra.tolist() == [[1, 2], [3, 4]]


def test_gradient_info_round_trip_and_combine_merges_moments_exactly():
    rng = np.random.default_rng(0)
    parts = [moments(rng, 50), moments(rng, 70)]
    grads = [Gradient.empty(4, 2, 3) for _ in parts]
    for i, (g, m) in enumerate(zip(grads, parts, strict=False)):
        g.fill(torch.ones(4), weights_version=3 + i, num_samples=64, new_env_steps=256,
               progress=0.5, stats=[1.0 + i, 2.0], moments=m)
    rows = np.stack([g.info.data for g in grads])
    out = Gradient.empty(4, 2, 3)
    combine_infos(rows, out.info)
    assert out.weights_version == 4 and out.num_samples == 128 and out.new_env_steps == 512
    assert out.stats().tolist() == [1.5, 2.0]
    obs, ret = out.moments.read()
    want = merge_moments([p[0] for p in parts])
    np.testing.assert_allclose(obs.mean, want.mean)
    np.testing.assert_allclose(obs.m2, want.m2)
    assert ret.count == 120


def test_moments_sum_over_ranks_as_one_block():
    rng = np.random.default_rng(1)
    parts = [moments(rng, 30), moments(rng, 90)]
    records = [Gradient.empty(1, 0, 3).moments.write(m) for m in parts]
    total = sum(r.to_sums_().block() for r in records)  # what the all-reduce computes
    records[0].block()[:] = total
    obs, _ = records[0].from_sums_().read()
    want = merge_moments([p[0] for p in parts])
    np.testing.assert_allclose(obs.mean, want.mean)
    np.testing.assert_allclose(obs.m2, want.m2, rtol=1e-9)


def test_the_command_travels_in_its_own_field_not_in_the_weights():
    w = Weights.new(5, 2)
    w.buffers[:] = [1.5, 2.5]
    w.set_command(STOP | CHECKPOINT)
    w.header.set(version=9)
    got = Weights(w.params.copy(), w.header.layout.wrap(w.header.data.copy()))
    assert got.command == STOP | CHECKPOINT and got.version == 9
    assert got.buffers.tolist() == [1.5, 2.5]


def test_report_grad_norm_is_the_mean_over_applied_steps():
    layout = ReportLayout(("loss",))
    reports = []
    for norms in ([1.0, 3.0], [2.0, float("nan"), 6.0]):
        r = layout.new()
        for n in norms:
            layout.add_stats(r, [n])
            layout.add_applied(r, n)
        reports.append(r.data)
    figures = layout.combine(np.stack(reports))
    assert figures["grad_norm"] == (1 + 3 + 2 + 6) / 4
    assert figures["skipped_updates"] == 1


def test_a_gradient_carries_its_tensor_itself_and_a_cpu_one_crosses_as_a_view():
    computed = torch.arange(4, dtype=torch.float32)
    g = Gradient.empty(4, 1, 2).fill(computed, 3, 10, 0, 0.5, [1.0], None)
    assert g.grads.data_ptr() == computed.data_ptr()  # no copy on the way to the updater
    host = g.host()  # what an MPI send reads: the same memory on a CPU learner
    host[0] = 9.0
    assert computed[0] == 9.0 and g.weights_version == 3 and g.num_samples == 10
    received = Gradient.empty(4, 1, 2)  # an updater's inbox: receives write into .grads
    received.host()[:] = [1.0, 2.0, 3.0, 4.0]
    assert received.grads.tolist() == [1.0, 2.0, 3.0, 4.0]
