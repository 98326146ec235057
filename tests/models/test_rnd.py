"""Random Network Distillation: the bonus solves an exploration task plain PPO does not, its
targets match a reference computed by hand, its target network stays fixed, and its keys
are refused where they cannot work."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from hpcrl.algorithms import make_algorithm
from hpcrl.buffers.intrinsic import discounted_returns
from hpcrl.buffers.returns import gae
from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.config import from_dict
from hpcrl.errors import ConfigError
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

CORRIDOR = ["env.id=hpcrl.tasks:Corridor-v0", "env.num_envs=8", "algo.num_steps=64",
            "algo.ppo.minibatch_size=128", "algo.ppo.num_epochs=4", "algo.gamma=0.99",
            "algo.lr=3e-4", "algo.lr_schedule=constant", "algo.ent_coef=0.01",
            "train.total_env_steps=20000", "train.eval_episodes=10",
            "train.tensorboard=false", "train.checkpoint_every=1000"]


def _train(tmp_path, name, sets):
    """The trainer after training, and its final evaluation's figures."""
    trainer = Trainer(from_dict({}, CORRIDOR + sets), RunDir(tmp_path / name), console=None)
    return trainer, trainer.train()


@pytest.mark.timeout(120)
def test_rnd_walks_the_corridor_that_plain_ppo_never_reaches_in_the_same_budget(tmp_path):
    """The 40-cell corridor pays only at its far end (a random walk gets there once in
    ~2000 episodes). On 20k env steps, seed 0: PPO with RND evaluates at return 1.0 (every
    episode reaches the end; seeds 0-3 all do, in ~3.5 s each), plain PPO at 0.0 (seeds
    0-5 all do, even on 100k steps)."""
    _, rnd = _train(tmp_path, "rnd", ["rnd.enabled=true"])
    _, plain = _train(tmp_path, "plain", [])
    print("RND", rnd, "plain", plain)
    assert rnd["mean_return"] == pytest.approx(1.0)
    assert plain["mean_return"] == pytest.approx(0.0)


def _corridor_job(extra=()):
    cfg = from_dict({}, CORRIDOR + ["rnd.enabled=true", *extra])
    spaces = env_spaces(cfg)
    return cfg, spaces, make_actor(cfg, spaces)


def _rollout(cfg, spaces, num_envs, offset, rng):
    """A rollout of random corridor observations with an episode end inside."""
    layout = rollout_layout(cfg, spaces, num_envs)
    r = layout.new()
    cells = rng.integers(0, 40, size=(layout.num_steps + 1, num_envs))
    r.obs[:] = np.eye(40, dtype=np.float32)[cells[:-1]]
    r.last_obs[:] = np.eye(40, dtype=np.float32)[cells[-1]]
    r.rewards[:] = rng.random(r.rewards.shape) < 0.05
    r.terminated[5] = 1.0
    r.values[:] = rng.standard_normal(r.values.shape)
    r.next_values[:-1] = r.values[1:]
    r.next_values[r.terminated > 0] = 0.0
    r.set_facts(layout.num_steps, 0, offset, 0)
    return r


def test_intrinsic_targets_match_a_reference_computed_by_hand():
    """Rewards are the predictor's error on the next observation (obs[t+1], last_obs at the
    end) normalised with the update's statistics and divided by the std of raw intrinsic
    returns; intrinsic GAE runs across the episode end; the advantage the policy follows
    is ext_coef x extrinsic + int_coef x intrinsic; values and returns carry both heads."""
    cfg, spaces, _ = _corridor_job()
    algorithm = make_algorithm(cfg, spaces)
    actor = algorithm.actor
    rollout = _rollout(cfg, spaces, 8, 0, np.random.default_rng(1))
    (part,) = algorithm.intrinsic.prepare([rollout], cfg.seed, 0, 8, torch.device("cpu"))
    rnd = actor.rnd
    obs = torch.from_numpy(rollout.obs)
    after = torch.cat([obs[1:], torch.from_numpy(rollout.last_obs)[None]]).flatten(0, 1)
    mean, var = after.double().mean(0), after.double().var(0, unbiased=False)
    n0 = 1e-4  # RunningMoments' prior count (mean 0, var 1)
    n = after.shape[0]
    mean_all = mean * n / (n + n0)
    var_all = (var * n + n0 + mean ** 2 * n * n0 / (n + n0)) / (n + n0)
    std = torch.sqrt(var_all + 1e-8)
    x = ((after - mean_all.float()) / std.float()).clamp(-5, 5)
    with torch.no_grad():
        raw = (rnd.predictor(x) - rnd.target(x)).pow(2).mean(-1).view(64, 8)
        values = actor.all_values(obs.flatten(0, 1))[:, 1].view(64, 8)
        last = actor.all_values(torch.from_numpy(rollout.last_obs))[:, 1]
    g = discounted_returns(raw.double(), last.double() * 1.0, 0.99).flatten()
    ret_var = (g.var(unbiased=False) * g.numel() + n0
               + g.mean() ** 2 * g.numel() * n0 / (g.numel() + n0)) / (g.numel() + n0)
    rewards = raw / torch.sqrt(ret_var + 1e-8).float()
    next_values = torch.cat([values[1:], last[None]])
    never = torch.zeros_like(rewards)
    adv_int, ret_int = gae(rewards, values, never, never, next_values, 0.99, 0.95)
    torch.testing.assert_close(part.values, values)
    torch.testing.assert_close(part.returns, ret_int, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(part.advantages, adv_int, rtol=1e-4, atol=1e-5)
    assert part.advantages[5].abs().sum() > 0  # the trace runs on over the episode end
    storage = RolloutStorage(cfg.algo.gamma, cfg.algo.gae_lambda)
    storage.load([rollout], [part])
    adv_ext, ret_ext = gae(*(torch.from_numpy(a) for a in (
        rollout.rewards, rollout.values, rollout.terminated, rollout.truncated,
        rollout.next_values)), cfg.algo.gamma, cfg.algo.gae_lambda)
    (batch,) = storage.parts  # the one rollout, held where it lies
    torch.testing.assert_close(batch.advantages, 2.0 * adv_ext + adv_int, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batch.returns[..., 0], ret_ext)
    assert batch.values.shape == batch.returns.shape == (64, 8, 2)
    assert 0.2 < float(batch.rnd_mask.mean()) < 0.3  # rnd.update_proportion 0.25


def test_intrinsic_targets_do_not_depend_on_how_envs_are_spread():
    """One rank holding 8 envs and two holding 4 each (their moments summed, as the
    reducer sums them) compute the same rewards, masks and statistics."""
    cfg, spaces, actor = _corridor_job()
    rng = np.random.default_rng(2)
    whole = _rollout(cfg, spaces, 8, 0, rng)
    halves = []
    for offset in (0, 4):
        half = rollout_layout(cfg, spaces, 4).new()
        for name in ("obs", "last_obs", "rewards", "terminated", "values", "next_values"):
            cols = getattr(whole, name)
            getattr(half, name)[:] = (cols[offset:offset + 4] if name == "last_obs"
                                      else cols[:, offset:offset + 4])
        half.set_facts(64, 0, offset, 0)
        halves.append(half)

    algorithm = make_algorithm(cfg, spaces)  # an actor-critic of the job's seed, as `actor`
    (ref,) = algorithm.intrinsic.prepare([whole], 0, 3, 8, torch.device("cpu"))
    ref_mean = algorithm.intrinsic.obs_mean.clone()
    barrier, slots = threading.Barrier(2), [None, None]

    class ThreadRank:  # the reducer of one of two ranks, here two threads
        def __init__(self, rank):
            self.rank = rank

        def sum_(self, tensor):
            slots[self.rank] = tensor.clone()
            barrier.wait()
            total = slots[0] + slots[1]
            barrier.wait()
            return tensor.copy_(total)

    ranks = [make_algorithm(cfg, spaces, reducer=ThreadRank(i)) for i in (0, 1)]
    parts = [None, None]

    def run(i):
        (parts[i],) = ranks[i].intrinsic.prepare([halves[i]], 0, 3, 8, torch.device("cpu"))

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for i, part in enumerate(parts):
        torch.testing.assert_close(ranks[i].intrinsic.obs_mean, ref_mean)
        for field in ("values", "returns", "advantages", "mask"):
            torch.testing.assert_close(getattr(part, field),
                                       getattr(ref, field)[:, 4 * i:4 * i + 4],
                                       rtol=1e-4, atol=1e-5)


@pytest.mark.timeout(60)
def test_training_moves_the_predictor_and_statistics_but_never_the_target(tmp_path):
    cfg, spaces, fresh = _corridor_job()
    trainer, _ = _train(tmp_path, "short", ["rnd.enabled=true", "train.total_env_steps=2048",
                                         "train.eval_episodes=0"])
    trained = trainer.actor.rnd
    for name, before in fresh.rnd.target.state_dict().items():
        assert torch.equal(before, trained.target.state_dict()[name]), name
    moved = [not torch.equal(before, trained.predictor.state_dict()[name])
             for name, before in fresh.rnd.predictor.state_dict().items()]
    assert all(moved)
    # every collected step's next observation went into the input statistics
    assert float(trained.obs_rms.count) == pytest.approx(2048, abs=1e-3)
    assert float(trained.ret_rms.count) == pytest.approx(2048, abs=1e-3)
    assert "rnd_loss" in trainer.learner.leader.layout.stat_names


@pytest.mark.parametrize("sets, words", [
    (["algo.name=impala"], "ppo or a2c"),
    (["algo.name=dqn"], "ppo or a2c"),
    (["actor.memory=gru"], "recurrent"),
    (["rnd.update_proportion=0"], "rnd.update_proportion"),
    (["rnd.int_coef=0"], "never reaches the policy"),
    (["rnd.hidden_sizes=[]"], "rnd.hidden_sizes"),
])
def test_rnd_refuses_what_cannot_work_before_training(sets, words):
    with pytest.raises(ConfigError, match=words):
        from_dict({}, ["rnd.enabled=true", *sets])


def test_an_rnd_key_without_rnd_is_refused_rather_than_ignored():
    with pytest.raises(ConfigError, match="rnd.enabled=true"):
        from_dict({}, ["rnd.int_coef=0.5"])


def test_the_actor_keeps_its_extrinsic_value_for_collectors():
    """Collectors store one value per step: the extrinsic head's (column 0)."""
    cfg, spaces, actor = _corridor_job()
    obs = torch.eye(40)[:3]
    both = actor.all_values(obs)
    assert both.shape == (3, 2)
    torch.testing.assert_close(actor.value(obs), both[:, 0])
    _, _, values, _ = actor.step(obs, torch.rand(3))
    torch.testing.assert_close(values, both[:, 0])
