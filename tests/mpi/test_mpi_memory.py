"""Under MPI, no rank's Python heap grows with the updates of an asynchronous preset.

``mpiexec -n 3 hpcrl train --set scheme.preset=async-ppo`` (one learner, two collector
ranks) runs a few hundred small updates with a census of every rank's heap (see
``tests/heap_probe.py``) at its 100th and 300th rollout or update. Checkpoints come every 5
updates, so that anything kept per checkpoint (a collector once kept every state it sent)
adds 40 objects in that span; anything kept per rollout or update adds 200.
"""
from __future__ import annotations

import json

import pytest

from mpirun import HERE, train

FIRST, LAST = 100, 300
MAX_OBJECTS, MAX_ITEMS = 5, 100  # a flat run: objects within +-3, items within +-30


@pytest.mark.timeout(240)
def test_async_ppo_ranks_heap_is_flat(tmp_path):
    heap = tmp_path / "heap"
    heap.mkdir()
    updates = LAST + 60
    train(3, tmp_path / "run", ["scheme.preset=async-ppo", "env.num_envs=2", "algo.num_steps=8",
                                "algo.minibatch_size=32", "algo.num_epochs=1",
                                "train.checkpoint_every=5",
                                f"train.total_env_steps={32 * updates}"],
          script=HERE / "heap_rank.py", timeout=220,
          env={"HPCRL_TEST_HEAP_DIR": str(heap), "HPCRL_TEST_HEAP_CALLS": f"{FIRST},{LAST}"})
    ranks = {int(p.stem[4:]): json.loads(p.read_text()) for p in heap.glob("rank*.json")}
    roles = {0: "gradients", 1: "collect", 2: "collect"}
    for rank, method in roles.items():
        figures = ranks[rank][method]
        assert figures["growth"] is not None, (rank, figures)
        objects, items = figures["growth"]
        assert objects <= MAX_OBJECTS and items <= MAX_ITEMS, (
            f"rank {rank} ({method}): the heap gained {objects} objects and {items} container "
            f"items from call {FIRST} to {LAST} ({figures['types']})")
