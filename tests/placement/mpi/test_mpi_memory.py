"""Under MPI, no rank's Python heap grows with the updates of an asynchronous preset.

``mpiexec -n 3 hpcrl train`` with the async-ppo and apex presets (one learner, two collector
ranks) runs a few hundred small updates with a census of every rank's heap (see
``tests/heap_probe.py``) at its 100th and 300th rollout, chunk, update or round of gradient
steps. Checkpoints come every 5 updates, so that anything kept per checkpoint (a collector
once kept every state it sent) adds dozens of objects in that span; anything kept per
rollout or update adds 200.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mpirun import HERE, train

FIRST, LAST = 100, 300
MAX_OBJECTS, MAX_ITEMS = 5, 100  # a flat run: objects within +-5, items within +-35


def assert_ranks_flat(tmp_path: Path, sets: list[str], probed: dict[int, str]) -> None:
    """Train with a census on every rank; each rank's ``probed`` method must see no growth."""
    heap = tmp_path / "heap"
    heap.mkdir()
    train(3, tmp_path / "run", sets + ["train.checkpoint_every=5"], script=HERE / "heap_rank.py",
          timeout=220,
          env={"HPCRL_TEST_HEAP_DIR": str(heap), "HPCRL_TEST_HEAP_CALLS": f"{FIRST},{LAST}"})
    ranks = {int(p.stem[4:]): json.loads(p.read_text()) for p in heap.glob("rank*.json")}
    for rank, method in probed.items():
        figures = ranks[rank][method]
        assert figures["growth"] is not None, (rank, figures)
        objects, items = figures["growth"]
        assert objects <= MAX_OBJECTS and items <= MAX_ITEMS, (
            f"rank {rank} ({method}): the heap gained {objects} objects and {items} container "
            f"items from call {FIRST} to {LAST} ({figures['types']})")


@pytest.mark.timeout(240)
def test_async_ppo_ranks_heap_is_flat(tmp_path):
    updates = LAST + 60  # 32 env steps each; collectors collect at least as many rollouts
    assert_ranks_flat(tmp_path, ["scheme.preset=async-ppo", "env.num_envs=2", "algo.num_steps=8",
                                 "algo.ppo.minibatch_size=32", "algo.ppo.num_epochs=1",
                                 f"train.total_env_steps={32 * updates}"],
                      {0: "gradients", 1: "collect", 2: "collect"})


@pytest.mark.timeout(240)
def test_apex_ranks_heap_is_flat(tmp_path):
    """The replay learner (its 2,000-transition replay full and wrapping) and the collectors
    streaming 8-step chunks, 8,000 env steps: about 700 rounds of one gradient step."""
    assert_ranks_flat(tmp_path, ["scheme.preset=apex", "algo.num_steps=8",
                                 "replay.learning_starts=200", "replay.batch_size=32",
                                 "replay.train_freq=8", "replay.gradient_steps=1",
                                 "replay.buffer_size=2000", "train.total_env_steps=8000"],
                      {0: "train", 1: "collect", 2: "collect"})
