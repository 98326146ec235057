"""A learner trains from rollouts where they landed (issue 43.4): on the CPU the storage holds
views of the rollouts' own buffers, no byte copied before the first minibatch; its
minibatches hold the same samples as before, each copied once from where it lies; and a
learner whose collector acts with its very actor publishes a new version without copying a
parameter."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.buffers.vtrace_storage import VTraceStorage
from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.envs.scripted import collector_env_groups
from hpcrl.exchange.messages import Weights
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
        "algo.ppo.num_epochs=2", "train.total_env_steps=1024", "train.eval_episodes=0",
        "train.tensorboard=false", "train.checkpoint_every=100"]


def rollouts_side_by_side(parts: int = 2, envs: int = 3, steps: int = 8):
    """``parts`` rollouts of ``envs`` envs each, of adjacent env slices (as the collectors
    of one learner give them)."""
    cfg = from_dict({}, [f"env.num_envs={envs}", f"algo.num_steps={steps}",
                         f"algo.ppo.minibatch_size={envs * 2}"])
    spaces = env_spaces(cfg)
    torch.manual_seed(0)
    actor = make_actor(cfg, spaces)
    out = []
    for k in range(parts):
        offset = k * envs
        envs_here = collector_env_groups(cfg.env, offset)
        collector = rollout_collector(envs_here, actor,
                                      cfg.env, cfg.algo.gamma, cfg.seed, offset,
                                      total_envs=parts * envs)
        out.append(collector.collect(rollout_layout(cfg, spaces, envs).new()))
    return cfg, out


def test_gae_storage_holds_views_of_the_rollouts_and_copies_nothing():
    cfg, rollouts = rollouts_side_by_side()
    storage = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda)
    storage.load(rollouts)
    assert storage.copied_bytes == 0
    assert storage.parts is not None and len(storage.parts) == 2
    for part, rollout in zip(storage.parts, rollouts, strict=True):
        assert np.shares_memory(part.obs.numpy(), rollout.data)
        assert np.shares_memory(part.actions.numpy(), rollout.data)  # int64 in the rollout
        assert part.actions.dtype == torch.int64
    assert (storage.num_steps, storage.num_envs, storage.num_samples) == (8, 6, 48)


def test_its_minibatches_hold_each_env_columns_own_steps_once():
    cfg, rollouts = rollouts_side_by_side()
    storage = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda)
    storage.load(rollouts)
    whole = np.concatenate([r.obs for r in rollouts], axis=1)  # [T, N, obs]
    gen = torch.Generator().manual_seed(7)
    order = torch.rand(8, 6, generator=gen).argsort(dim=0)  # the stratified order
    seen = []
    for j, batch in enumerate(storage.minibatches(2, 7, 6)):
        assert batch.num_samples == 24  # 4 steps of each of the 6 envs
        expected = {tuple(whole[int(order[4 * j + i, n]), n]) for i in range(4)
                    for n in range(6)}
        assert {tuple(row) for row in batch.obs.numpy()} == expected
        seen += [tuple(row) for row in batch.obs.numpy()]
    assert len(seen) == len(set(seen)) == 48  # every sample once per epoch


def test_vtrace_storage_holds_views_and_joins_them_for_its_batch():
    cfg, rollouts = rollouts_side_by_side()
    storage = VTraceStorage(cfg.algo.gamma)
    storage.load(rollouts)
    assert storage.copied_bytes == 0 and storage.parts is not None
    assert np.shares_memory(storage.parts[1].obs.numpy(), rollouts[1].data)
    batch = storage.full_batch()  # the first minibatch: the one copy
    torch.testing.assert_close(batch.obs, torch.from_numpy(
        np.concatenate([r.obs for r in rollouts], axis=1)))
    assert batch.num_samples == 48


def test_a_gpu_storage_copies_each_field_to_the_device_once():
    if not torch.cuda.is_available():
        pytest.skip("no GPU here: benchmarks/gpu_check.py runs this on one")
    cfg, rollouts = rollouts_side_by_side()
    storage = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda, "cuda")
    storage.load(rollouts)
    assert storage.copied_bytes <= sum(r.data.nbytes for r in rollouts)


def test_a_learner_sharing_its_actor_publishes_versions_without_copying(tmp_path,
                                                                      monkeypatch):
    captured = []
    original = Weights.capture

    def counting(self, module, version, command=0):
        captured.append(version)
        return original(self, module, version, command)

    monkeypatch.setattr(Weights, "capture", counting)
    trainer = Trainer(from_dict({}, TINY), RunDir(tmp_path / "run"), console=None)
    trainer.train()
    assert captured == []  # 16 updates (64 optimiser steps) published by version alone
    collector = trainer.learner.updates.source.collector
    assert collector.weights_version == trainer.learner.updates.version == 64  # steps
