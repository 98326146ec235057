"""The policy-loss add-ons (algo.addons): KL attraction lowers the KL to the named policy
against training without it and repulsion raises it, on PPO, A2C and IMPALA; the reward
and return predictors' losses fall and their predictions reach their targets; a run with
add-ons resumes exactly and evaluates; a plug-in loss that evaluates the actor itself gets
the same terms; what cannot work is refused before training."""
import csv

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from kill_resume import rows as exact_rows
from kill_resume import whole_then_killed_and_resumed
from quiet_training import train_quietly
from torch.distributions import Categorical, Normal, kl_divergence

from hpcrl.algorithms import PPO
from hpcrl.algorithms.registry import algorithm_settings
from hpcrl.buffers.rollout_storage import RolloutBatch
from hpcrl.build import env_spaces, make_actor
from hpcrl.cli import main
from hpcrl.config import ConfigError, from_dict
from hpcrl.learning.evaluation import run_episodes
from hpcrl.models.distributions import make_distribution
from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic
from hpcrl.runtime.run_dir import RunDir
from hpcrl.trained.loading import load_policy_and_config

# what each algorithm learns CartPole with in a few seconds
AGENTS = {"ppo": [],
          "a2c": ["algo.name=a2c"],
          "impala": ["algo.name=impala", "algo.num_steps=8", "algo.lr=7e-4",
                     "algo.lr_schedule=constant", "algo.optimizer=rmsprop"]}
PREDICTORS = ["algo.addons.reward_predictor_coef=0.5", "algo.addons.return_predictor_coef=0.5"]


def kl_entry(policy, mode, **extra):
    fields = ", ".join(f"{k}: {v}" for k, v in {"policy": policy, "mode": mode,
                                                 **extra}.items())
    return f"algo.addons.kl_policies=[{{{fields}}}]"


def progress(run_dir):
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def other_policy(tmp_path_factory):
    """The policy to attract or repel: PPO after two updates on CartPole (seed 1), nearly
    indifferent between its actions where a trained policy is sure; and the observations
    of its own episodes, where the KLs are measured."""
    run = tmp_path_factory.mktemp("other")
    train_quietly(run, ["seed=1", "train.total_env_steps=512"])
    policy, config = load_policy_and_config(run)
    seen = []
    run_episodes(policy, config.env, 3, config.seed, on_step=lambda e, obs, *rest: seen.append(
        torch.as_tensor(obs, dtype=torch.float32)))
    return run, policy, torch.stack(seen)


def kl_to(other, student, obs):
    """Mean KL(other || student) of their action distributions at ``obs``."""
    with torch.no_grad():
        return float(student.distribution.kl(other.policy_params(obs),
                                             student.policy_params(obs)).mean())


def test_distribution_kls_are_torchs():
    torch.manual_seed(0)
    p, q = torch.randn(5, 3), torch.randn(5, 3)
    torch.testing.assert_close(make_distribution((3,), True, 0).kl(p, q),
                               kl_divergence(Categorical(logits=p), Categorical(logits=q)))
    p, q = torch.randn(5, 2, 4), torch.randn(5, 2, 4)
    expected = kl_divergence(Normal(p[:, 0], p[:, 1].exp()),
                             Normal(q[:, 0], q[:, 1].exp())).sum(-1)
    torch.testing.assert_close(make_distribution(None, False, 4).kl(p, q), expected)
    p, q = torch.randn(5, 5), torch.randn(5, 5)
    split = [Categorical(logits=x) for x in (p[:, :2], p[:, 2:], q[:, :2], q[:, 2:])]
    torch.testing.assert_close(make_distribution((2, 3), False, 0).kl(p, q),
                               kl_divergence(split[0], split[2]) + kl_divergence(split[1],
                                                                                 split[3]))


def test_ppo_attraction_lowers_and_repulsion_raises_the_kl_to_the_other_policy(
        tmp_path, other_policy):
    """Same seed and budget: without a term the KL grows as the policy grows sure of its
    actions; attracted it stays near the other policy, repelled it moves well past it. The
    column reports the term's KL on the minibatches, and the run evaluates."""
    other_run, other, obs = other_policy
    budget = ["train.total_env_steps=8192"]
    measured, runs = {}, {}
    for mode in ("none", "attract", "repel"):
        sets = budget + ([] if mode == "none" else [kl_entry(other_run, mode)])
        runs[mode] = train_quietly(tmp_path / mode, sets)
        measured[mode] = kl_to(other, runs[mode].actor, obs)
    assert measured["attract"] < 0.5 * measured["none"], measured
    assert measured["repel"] > 2 * measured["none"] and measured["repel"] > 0.5, measured
    attract = [float(r["kl_attract_0"]) for r in progress(tmp_path / "attract")]
    assert max(attract[-4:]) < 0.5 * measured["none"], attract
    repel = [float(r["kl_repel_0"]) for r in progress(tmp_path / "repel")]
    assert sum(repel[-4:]) / 4 > 1.0 > repel[0], repel  # pushed past max_kl's 1 nat
    result = CliRunner().invoke(main, ["eval", str(tmp_path / "attract"), "-n", "2", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("algo", ["a2c", "impala"])
def test_a2c_and_impala_take_the_kl_terms_and_the_predictors(tmp_path, other_policy, algo):
    """Attraction and the predictors in one run against the same run without them."""
    other_run, other, obs = other_policy
    sets = AGENTS[algo] + ["train.total_env_steps=12000"]
    plain = train_quietly(tmp_path / "plain", sets)
    added = train_quietly(tmp_path / "added", sets + [kl_entry(other_run, "attract")]
                          + PREDICTORS)
    ours, theirs = (kl_to(other, t.actor, obs) for t in (added, plain))
    assert ours < 0.5 * theirs, (ours, theirs)
    table = progress(tmp_path / "added")
    first, last = table[:3], table[-3:]

    def mean(part, key):
        return sum(float(r[key]) for r in part) / len(part)
    assert mean(last, "reward_predictor_loss") < 0.1 * mean(first, "reward_predictor_loss")
    assert abs(mean(last, "reward_prediction") - 1.0) < 0.1  # CartPole's reward: 1 a step


def test_predictors_learn_their_targets(tmp_path):
    """CartPole's rewards (1 each step) and returns (which grow with the episodes): the losses
    fall, relative to the targets' size for the returns, and the mean predictions reach the
    mean targets."""
    train_quietly(tmp_path, PREDICTORS + ["train.total_env_steps=16384"])
    table = progress(tmp_path)
    first, last = table[:4], table[-8:]

    def mean(part, key):
        return sum(float(r[key]) for r in part) / len(part)
    assert mean(last, "reward_predictor_loss") < 0.02 * mean(first, "reward_predictor_loss")
    assert abs(mean(last, "reward_prediction") - 1.0) < 0.05
    relative = [mean(part, "return_predictor_loss") / mean(part, "return_target") ** 2
                for part in (first, last)]
    assert relative[1] < 0.2 * relative[0], relative
    gap = abs(mean(last, "return_prediction") - mean(last, "return_target"))
    assert gap < 0.1 * mean(last, "return_target"), gap


def test_a_run_with_add_ons_resumes_exactly_and_refuses_a_changed_policy(
        tmp_path, tiny_overrides, monkeypatch, other_policy):
    other_run, _, _ = other_policy
    cfg = from_dict({}, tiny_overrides + [kl_entry(other_run, "repel", max_kl=0.5)]
                    + PREDICTORS)
    whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 10)
    whole, cut = (load_checkpoint(RunDir(tmp_path / r).checkpoint_path)["policy"]["state_dict"]
                  for r in ("whole", "cut"))
    assert "predictor_head.weight" in whole
    assert all(torch.equal(whole[k], cut[k]) for k in whole)
    assert exact_rows(tmp_path / "whole") == exact_rows(tmp_path / "cut")
    # the other policy changes under the run (a run directory that went on training)
    copy = tmp_path / "other.pt"
    state = load_checkpoint(RunDir(other_run).checkpoint_path)
    save_atomic(state, copy)
    moved = from_dict({}, tiny_overrides + [kl_entry(copy, "attract")])
    Trainer(moved, RunDir(tmp_path / "moved"), console=None).train()
    state["policy"]["state_dict"]["pi_head.bias"] += 1.0
    save_atomic(state, copy)
    run = RunDir(tmp_path / "moved")
    with pytest.raises(ConfigError, match="kl_attract_0 is not the one this run started with"):
        Trainer(resume_config(run, ["train.total_env_steps=1024"]), run, resume=True,
                console=None).train()


def test_what_cannot_work_is_refused_before_training(tmp_path, other_policy):
    other_run, _, _ = other_policy

    def refusal(sets):
        with pytest.raises(ConfigError) as err:
            Trainer(from_dict({}, sets), RunDir(tmp_path / "refused"), console=None)
        return str(err.value)
    assert "learns from a replay" in refusal(["algo.name=sac", "env.id=Pendulum-v1",
                                              "algo.addons.return_predictor_coef=1"])
    assert "normalised by this run's running statistics" in refusal(
        [kl_entry(other_run, "attract"), "env.normalize_obs=true"])
    assert "no checkpoint at" in refusal([kl_entry(tmp_path / "nowhere", "attract")])
    assert "observes (4,), this run's env (6,)" in refusal(
        [kl_entry(other_run, "repel"), "env.id=Acrobot-v1"])
    assert "mode: repel, not a negative coef" in refusal(
        [kl_entry(other_run, "attract", coef=-1)])
    assert "is taken by an earlier entry" in refusal([
        f"algo.addons.kl_policies=[{{policy: {other_run}, mode: attract, name: a}}, "
        f"{{policy: {other_run}, mode: repel, name: a}}]"])
    recurrent = tmp_path / "recurrent"
    train_quietly(recurrent, ["actor.memory=gru", "actor.memory_size=8",
                              "train.total_env_steps=256"])
    assert "is recurrent" in refusal([kl_entry(recurrent, "attract")])


class OwnEvaluationPPO(PPO):
    """A plug-in whose loss evaluates the actor its own way, leaving the add-ons nothing."""

    def evaluate(self, batch):
        return (*self.actor.evaluate(batch.obs, batch.actions), batch)


def test_a_loss_that_evaluates_the_actor_itself_gets_the_same_terms():
    """The add-ons read what PPO's own evaluation of the minibatch left them; a plug-in's
    loss that evaluates the actor otherwise gets them from one more evaluation: the same
    gradient."""
    sets = ["algo.addons.kl_policies=[{policy: unread, mode: repel, max_kl: 5}]", *PREDICTORS]
    config = from_dict({}, sets)
    spaces = env_spaces(from_dict({}, []))  # (env_spaces would read the policy's file)
    other = make_actor(from_dict({}, ["seed=1"]), spaces)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.normal(size=(64, 4)), dtype=torch.float32)
    actions = torch.as_tensor(rng.integers(0, 2, 64))
    returns = torch.as_tensor(rng.normal(size=64), dtype=torch.float32)
    grads = []
    for cls in (PPO, OwnEvaluationPPO):
        algo = cls(spaces, algorithm_settings(config))  # as hpcrl builds every algorithm
        algo.addons.attach([other])
        with torch.no_grad():
            log_probs, _, values = algo.actor.evaluate(obs, actions)
        batch = RolloutBatch(obs, actions, log_probs + 0.1, values, returns - values, returns,
                             None, torch.ones(64))
        flat, stats = algo.compute_gradients(batch)
        assert stats["kl_repel_0"] > 0 and stats["reward_target"] == 1.0
        grads.append(flat.clone())
    torch.testing.assert_close(grads[0], grads[1])
