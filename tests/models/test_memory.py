"""Recurrent actors: the loss recomputes exactly what the collector computed, step by step,
across rollout boundaries and episode ends; minibatches of sequences tile the rollout."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcrl.algorithms import make_algorithm
from hpcrl.build import env_spaces, make_storage, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config.loader import ConfigError, from_dict
from hpcrl.config.validate import validate
from hpcrl.envs.vector import make_vector_env
from hpcrl.models.memory import evaluate_rollouts

sys.path.insert(0, str(Path(__file__).parents[1] / "placement" / "mpi"))
import hpcrl_testenvs  # noqa: E402,F401  (registers CueMemory-v0)

CUE = "env.id=hpcrl_testenvs:CueMemory-v0"


def collector_and_actor(sets: list[str]):
    cfg = from_dict({}, [CUE, "actor.memory_size=16", *sets])
    spaces = env_spaces(cfg)
    algorithm = make_algorithm(cfg, spaces)
    actor = algorithm.actor  # the algorithm's own actor-critic, which the collector acts with
    with torch.no_grad():  # weights far from the initialisation, so the state matters
        for p in actor.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    envs = make_vector_env(cfg.env, cfg.env.num_envs)
    collector = rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed)
    return cfg, spaces, algorithm, collector


@pytest.mark.parametrize("memory,shared,bptt", [("gru", False, 0), ("lstm", True, 8),
                                                ("gru", True, 4)])
def test_the_loss_recomputes_the_collectors_log_probs_and_values(memory, shared, bptt):
    cfg, spaces, algorithm, collector = collector_and_actor(
        [f"actor.memory={memory}", f"actor.shared_trunk={str(shared).lower()}",
         f"algo.bptt_len={bptt}", "algo.ppo.num_epochs=1", "actor.memory_layers=2"])
    layout = rollout_layout(cfg, spaces, cfg.env.num_envs)
    actor = algorithm.actor
    storage = make_storage(cfg, spaces)
    for _ in range(3):  # the second and third rollouts start from carried states
        rollout = collector.collect(layout.new())
    done = (rollout.terminated + rollout.truncated) > 0
    assert done[:-1].any(), "episodes must end inside the rollout"
    assert np.abs(rollout.memory).sum() > 0, "a carried state is not zero"
    storage.load([rollout])
    log_probs, _, values, samples = algorithm.evaluate(storage.full_batch())
    with torch.no_grad():
        torch.testing.assert_close(log_probs, samples.log_probs, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(values, samples.values, rtol=1e-4, atol=1e-5)
        out = evaluate_rollouts(actor, torch.from_numpy(rollout.obs),
                                torch.from_numpy(rollout.actions).long(),
                                torch.from_numpy(rollout.memory),
                                torch.from_numpy(np.concatenate([np.zeros_like(done[:1]),
                                                                 done[:-1]])),
                                layout.sequence_length or layout.num_steps)
    torch.testing.assert_close(out[0], torch.from_numpy(rollout.log_probs), rtol=1e-4,
                               atol=1e-5)
    torch.testing.assert_close(out[2], torch.from_numpy(rollout.values), rtol=1e-4, atol=1e-5)
    # IMPALA's rollouts cut to the shortest: the first 20 steps, sequences as collected
    length = layout.sequence_length or layout.num_steps
    starts = np.concatenate([np.zeros_like(done[:1]), done[:-1]])
    with torch.no_grad():
        cut = evaluate_rollouts(actor, torch.from_numpy(rollout.obs[:20]),
                                torch.from_numpy(rollout.actions[:20]).long(),
                                torch.from_numpy(rollout.memory),
                                torch.from_numpy(starts[:20]), length)
    torch.testing.assert_close(cut[0], torch.from_numpy(rollout.log_probs[:20]), rtol=1e-4,
                               atol=1e-5)


def test_a_states_rows_reset_where_episodes_end():
    cfg, spaces, algorithm, collector = collector_and_actor(["actor.memory=gru"])
    layout = rollout_layout(cfg, spaces, cfg.env.num_envs)
    for _ in range(20):  # until a rollout's last step ends some episodes but not all
        rollout = collector.collect(layout.new())
        last_done = (rollout.terminated[-1] + rollout.truncated[-1]) > 0
        if last_done.any() and not last_done.all():
            break
    assert last_done.any() and not last_done.all()
    # the state carried into the next rollout is zero exactly for the envs whose episode
    # ended at the last step
    zero_rows = ~np.abs(collector.filler.memory).any(axis=1)
    np.testing.assert_array_equal(zero_rows, last_done)


def test_minibatches_hold_whole_sequences_of_every_env_once_per_epoch():
    cfg, spaces, algorithm, collector = collector_and_actor(
        ["actor.memory=gru", "algo.num_steps=32", "algo.ppo.minibatch_size=64"])
    assert validate(cfg) is None
    storage = make_storage(cfg, spaces)
    storage.load([collector.collect(rollout_layout(cfg, spaces, cfg.env.num_envs).new())])
    batches = list(storage.minibatches(4, seed=3, total_envs=cfg.env.num_envs))
    assert [b.steps.values.shape for b in batches] == [torch.Size([8, 8])] * 4
    seen = torch.cat([b.steps.values.T for b in batches]).sort(dim=0).values
    assert torch.equal(seen, storage.sequences.steps.values.T.sort(dim=0).values)


@pytest.mark.parametrize("sets,needle", [
    (["actor.memory=gru", "algo.name=dqn"], "holds no recurrent state"),
    (["actor.memory=gru", "algo.bptt_len=32", "algo.ppo.minibatch_size=128"],
     "algo.bptt_len=32 gives 1 sequences per env of the 32-step rollout that split into the "
     "2 minibatches per epoch; set algo.bptt_len to one of 16, 8, 4, 2, 1"),
    (["actor.memory=lstm", "algo.bptt_len=5"], "must divide algo.num_steps"),
    (["actor.memory_size=0"], "actor.memory_size"),
    (["algo.bptt_len=8"], "config key 'algo.bptt_len' is read by recurrent actors only"),
    (["actor.memory_layers=2"], "config key 'actor.memory_layers' is read by recurrent"),
])
def test_recurrent_settings_that_cannot_work_are_refused(sets, needle):
    with pytest.raises(ConfigError) as err:
        from_dict({}, sets)
    assert needle in str(err.value)


def test_a_rollout_cut_short_ends_in_a_padded_sequence_that_the_loss_leaves_out():
    cfg, spaces, algorithm, collector = collector_and_actor(
        ["actor.memory=lstm", "algo.bptt_len=16", "algo.ppo.num_epochs=1"])
    layout = rollout_layout(cfg, spaces, cfg.env.num_envs)
    storage = make_storage(cfg, spaces)
    whole = collector.collect(layout.new())
    cut = collector.collect(layout.new(), should_stop=lambda done: done >= 20)  # preempted
    assert cut.valid_steps == 20
    storage.load([whole, cut])  # a pool: 2 + 2 sequences per env, the last one 4 steps long
    batch = storage.full_batch()
    assert batch.valid is not None and batch.num_samples == (32 + 20) * cfg.env.num_envs
    log_probs, _, values, samples = algorithm.evaluate(batch)
    assert log_probs.shape == (batch.num_samples,)
    with torch.no_grad():
        torch.testing.assert_close(log_probs, samples.log_probs, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(values, samples.values, rtol=1e-4, atol=1e-5)
    minibatches = list(storage.minibatches(3, seed=0, total_envs=cfg.env.num_envs))
    assert sum(b.num_samples for b in minibatches) == batch.num_samples
