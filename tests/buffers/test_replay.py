"""Replay storage: sum-tree sampling follows the priorities, buffers wrap and checkpoint."""
import io

import numpy as np
import pytest
import torch

from hpcrl.buffers.replay import PrioritizedReplayBuffer, ReplayBuffer, SumTree, TransitionLayout


def test_sum_tree_prefix_lookup_total_and_min():
    tree = SumTree(5)
    tree.update(np.arange(5), np.array([1.0, 2.0, 0.5, 3.0, 1.5]))
    assert tree.total == pytest.approx(8.0) and tree.min == pytest.approx(0.5)
    # cumulative sums 1, 3, 3.5, 6.5, 8
    assert tree.find(np.array([0.0, 0.99, 1.0, 2.9, 3.2, 3.5, 6.4, 7.99])).tolist() == \
        [0, 0, 1, 1, 2, 3, 3, 4]
    tree.update(np.array([3, 3]), np.array([9.0, 0.25]))  # the last value wins
    assert tree.get(np.array([3]))[0] == 0.25 and tree.min == pytest.approx(0.25)
    assert tree.total == pytest.approx(5.25)


def test_sum_tree_sampling_frequencies_match_priorities():
    rng = np.random.default_rng(0)
    priorities = rng.uniform(0.1, 5.0, 37)
    tree = SumTree(37)
    tree.update(np.arange(37), priorities)
    draws = 400_000
    rows = tree.find(rng.random(draws) * tree.total)
    freq = np.bincount(rows, minlength=37) / draws
    expected = priorities / priorities.sum()
    assert np.abs(freq - expected).max() < 4 * np.sqrt(expected.max() / draws)


def fill(buffer, n, start=0):
    obs = (start + np.arange(n, dtype=np.float32))[:, None].repeat(2, axis=1)
    return buffer.add_rows(obs, np.zeros(n, np.float32), obs[:, 0], np.full(n, 0.9, np.float32),
                           obs + 1)


def test_prioritized_sampling_follows_priority_power_alpha_with_weights():
    buf = PrioritizedReplayBuffer(16, (2,), (), True, seed=0, alpha=0.7, eps=0.0)
    fill(buf, 10)
    priorities = np.linspace(0.5, 5.0, 10)
    buf.update_priorities(np.arange(10), priorities)
    draws, counts = 0, np.zeros(10)
    for _ in range(2000):
        batch = buf.sample(64, beta=0.5)
        counts += np.bincount(batch.indices, minlength=10)
        draws += 64
    p = priorities ** 0.7 / (priorities ** 0.7).sum()
    assert np.abs(counts / draws - p).max() < 0.01
    batch = buf.sample(64, beta=0.5)
    w = (10 * p[batch.indices]) ** -0.5 / (10 * p.min()) ** -0.5
    np.testing.assert_allclose(batch.weights.numpy(), w, rtol=1e-5)
    assert batch.weights.max() <= 1.0
    np.testing.assert_array_equal(batch.obs[:, 0].numpy(), batch.indices.astype(np.float32))


def test_new_rows_get_the_largest_priority_seen():
    buf = PrioritizedReplayBuffer(8, (2,), (), True, seed=0, alpha=1.0, eps=0.0)
    fill(buf, 4)
    buf.update_priorities(np.array([0, 1]), np.array([7.0, 0.5]))
    fill(buf, 1, start=4)
    assert buf.tree.get(np.array([4]))[0] == pytest.approx(7.0)


def test_uniform_buffer_wraps_and_samples_only_written_rows():
    buf = ReplayBuffer(5, (2,), (), True, seed=1)
    fill(buf, 3)
    assert len(buf) == 3 and set(buf.sample(200).obs[:, 0].tolist()) <= {0.0, 1.0, 2.0}
    fill(buf, 4, start=3)  # rows 5 and 6 overwrite the oldest (0 and 1)
    assert len(buf) == 5 and buf.pos == 2
    assert sorted(buf.observations.obs[:, 0].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    batch = buf.sample(64)
    np.testing.assert_array_equal(batch.next_obs.numpy(), batch.obs.numpy() + 1)
    assert batch.actions.dtype == torch.int64 and batch.weights is None


@pytest.mark.parametrize("prioritized", [False, True])
def test_buffer_state_round_trips_through_a_weights_only_checkpoint(prioritized):
    def make():
        if prioritized:
            return PrioritizedReplayBuffer(32, (2,), (), True, seed=3, alpha=0.6)
        return ReplayBuffer(32, (2,), (), True, seed=3)
    a, b = make(), make()
    fill(a, 40)
    a.sample(8)
    a.update_priorities(np.arange(5), np.arange(5) + 1.0)
    raw = io.BytesIO()
    torch.save(a.state_dict(), raw)
    raw.seek(0)
    b.load_state_dict(torch.load(raw, weights_only=True))
    for _ in range(3):
        x, y = a.sample(16, 0.4), b.sample(16, 0.4)
        np.testing.assert_array_equal(x.indices, y.indices)
        assert torch.equal(x.obs, y.obs)


def test_transition_chunk_rejects_overflow():
    chunk = TransitionLayout(3, (2,), ()).new()
    chunk.append(np.zeros((2, 2)), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros((2, 2)))
    assert chunk.count == 2
    with pytest.raises(ValueError, match="capacity 3"):
        chunk.append(np.zeros((2, 2)), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros((2, 2)))
