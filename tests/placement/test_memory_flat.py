"""The Python heap of a serial training run stays flat: nothing it keeps grows with updates.

A run of a few hundred small updates (collector, gradient worker and updater in this
process) takes a census of the heap (see :mod:`heap_probe`) at update 100 and update 350.
A leak of one small object per update (a request kept per message, a list of episode
figures) adds 250 objects or container items in that span; checkpoints come every 10
updates, so one kept per checkpoint adds 25 objects.
"""
from __future__ import annotations

import pytest
from heap_probe import HeapProbe

from hpcrl.config import from_dict
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

FIRST, LAST = 100, 350
MAX_OBJECTS, MAX_ITEMS = 5, 150  # a flat run: 0 objects, items within +-60 (episode window)


SMALL_PPO = ["env.num_envs=2", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
             "algo.ppo.num_epochs=1"]


def traced_serial_run(tmp_path, overrides: list[str], steps_per_update: int,
                      leak: bool = False) -> HeapProbe:
    """A serial run with a census at updates FIRST and LAST (``leak``: keeping one small
    list per update, as a leaking role would)."""
    config = from_dict({}, overrides + [
        "train.eval_episodes=0", "train.tensorboard=false", "train.checkpoint_every=10",
        f"train.total_env_steps={steps_per_update * (LAST + 1)}"])
    trainer = Trainer(config, RunDir(tmp_path), console=None)
    if leak:
        kept: list[list[int]] = []
        learn_update = trainer.learner.learn_update

        def leaking(*args, **kwargs):
            kept.append([len(kept)])
            return learn_update(*args, **kwargs)

        trainer.learner.learn_update = leaking
    probe = HeapProbe(trainer.learner, "learn_update", FIRST, LAST)
    trainer.train()
    return probe


def assert_flat(probe: HeapProbe, what: str) -> None:
    objects, items = probe.figures.growth()
    assert objects <= MAX_OBJECTS and items <= MAX_ITEMS, (
        f"{what}: the heap gained {objects} objects and {items} container items from "
        f"update {FIRST} to {LAST} ({probe.figures.grown_types()})")


def test_serial_ppo_heap_is_flat(tmp_path):
    assert_flat(traced_serial_run(tmp_path, SMALL_PPO, 32), "serial PPO")


def test_census_sees_a_leak_of_one_object_per_update(tmp_path):
    """The check above fails on a run that keeps one small list per update."""
    probe = traced_serial_run(tmp_path, SMALL_PPO, 32, leak=True)
    with pytest.raises(AssertionError, match=r"gained 2\d\d objects"):
        assert_flat(probe, "serial PPO keeping a list per update")
