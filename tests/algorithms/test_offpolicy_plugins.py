"""An off-policy algorithm of one's own (examples/munchausen_dqn.py, by import path) is a
plug-in like an on-policy one: its target is the paper's (DQN's in the limit), it runs with
its base's capabilities and defaults, trains, evaluates and loads from its YAML; a broken
one is refused before training, naming what is wrong."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import hpcrl
from hpcrl.algorithms import DQN, algorithm_capabilities, algorithm_kind, make_algorithm
from hpcrl.build import env_spaces
from hpcrl.cli import main
from hpcrl.config import from_dict
from hpcrl.config.loader import ConfigError
from hpcrl.models.qnetwork import QNetwork

EXAMPLES = Path(__file__).parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # the example's module, as PYTHONPATH=examples gives it
sys.path.insert(0, str(Path(__file__).parents[1] / "placement" / "mpi"))  # the broken components
import munchausen_dqn  # noqa: E402

NAME = "munchausen_dqn:MunchausenDQN"


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def batch_of(spaces, size: int = 32, seed: int = 0) -> hpcrl.ReplayBatch:
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(rng.normal(size=(size, *spaces.obs_shape)), dtype=torch.float32)
    return hpcrl.ReplayBatch(
        obs=obs, actions=torch.as_tensor(rng.integers(0, 2, size)),
        rewards=torch.ones(size), discounts=torch.full((size,), 0.99),
        next_obs=obs + 0.1, weights=None, indices=np.arange(size))


def algorithms(**kwargs):
    config = from_dict({}, [f"algo.name={NAME}", "algo.dqn.double_q=false"])
    spaces = env_spaces(config)
    config.algo.kwargs = kwargs
    plugin = make_algorithm(config, spaces)
    config.algo.name = "dqn"
    config.algo.kwargs = {}
    return plugin, make_algorithm(config, spaces), spaces


def test_without_its_bonus_and_with_a_cold_temperature_the_target_is_dqns():
    plugin, dqn, spaces = algorithms(alpha=0.0, entropy_tau=1e-4)
    assert isinstance(plugin, munchausen_dqn.MunchausenDQN) and isinstance(plugin, DQN)
    for mine, theirs in zip(plugin.q.parameters(), dqn.q.parameters(), strict=True):
        assert torch.equal(mine, theirs)  # one seed, one initialisation
    batch = batch_of(spaces)
    target, bonus = plugin.munchausen_target(batch)
    next_max = dqn.target_q.module.q_values(batch.next_obs).max(dim=1).values
    torch.testing.assert_close(target, batch.rewards + batch.discounts * next_max,
                               atol=2e-3, rtol=0)
    assert torch.all(bonus == 0)
    with torch.no_grad():
        mine_loss, stats = plugin.loss(batch)
        dqn_loss, _ = dqn.loss(batch)
    torch.testing.assert_close(mine_loss, dqn_loss, atol=2e-3, rtol=0)
    assert set(stats) == set(munchausen_dqn.MunchausenDQN.stat_names)


def test_the_bonus_is_the_scaled_clipped_log_probability_of_the_action_taken():
    plugin, _, spaces = algorithms(alpha=0.9, entropy_tau=0.03, log_clip=-1.0)
    batch = batch_of(spaces)
    _, bonus = plugin.munchausen_target(batch)
    q = plugin.target_q.module.q_values(batch.obs)
    log_pi = torch.log_softmax(q / 0.03, dim=1).gather(1, batch.actions[:, None]).squeeze(1)
    torch.testing.assert_close(bonus, 0.9 * (0.03 * log_pi).clamp(-1.0, 0.0))
    assert torch.all(bonus <= 0) and torch.all(bonus >= -0.9)


def test_it_runs_with_its_bases_capabilities_and_defaults():
    config = from_dict({}, [f"algo.name={NAME}"])
    assert algorithm_kind(config.algo.name) == "dqn"
    assert algorithm_capabilities(config.algo.name) == algorithm_capabilities("dqn")
    assert config.replay.train_freq == 256 and config.replay.n_step == 3  # DQN's recipe
    out = invoke("plan", EXAMPLES / "munchausen-dqn.yaml", "--set", "scheme.preset=apex")
    assert out.exit_code == 0, out.output
    assert "replay" in out.output


@pytest.mark.timeout(120)
def test_the_example_yaml_trains_evaluates_and_loads(tmp_path):
    run = tmp_path / "run"
    out = invoke("train", EXAMPLES / "munchausen-dqn.yaml", "--run-dir", run,
                 "--set", "train.total_env_steps=3072", "--set", "train.eval_episodes=2",
                 "--set", "train.tensorboard=false")
    assert out.exit_code == 0, out.output
    header, *rows = (run / "progress.csv").read_text().splitlines()
    column = header.split(",").index("munchausen_bonus")
    bonuses = [float(r.split(",")[column]) for r in rows]
    assert all(-0.9 <= b < 0 for b in bonuses), bonuses
    policy = hpcrl.load_policy(run)
    assert isinstance(policy, QNetwork)
    assert int(policy(torch.zeros(4))) in (0, 1)
    out = invoke("eval", run, "--episodes", "2")
    assert out.exit_code == 0 and "mean return" in out.output, out.output


@pytest.mark.parametrize("sets, says", [
    ([f"algo.name={NAME}", "algo.kwargs={temperature: 1}"], "temperature"),
    (["algo.name=hpcrl_testplugins:NoTargetUpdates"], "does not define update_targets"),
    (["algo.name=hpcrl_testplugins:NoOffPolicyStats"], "stat_names must name"),
])
def test_broken_offpolicy_plugins_are_refused_before_training(sets, says):
    with pytest.raises(ConfigError, match=says):
        from_dict({}, sets)


def test_a_constructor_that_refuses_its_kwargs_is_named_with_them(tmp_path):
    out = CliRunner().invoke(main, ["train", str(EXAMPLES / "munchausen-dqn.yaml"),
                                    "--run-dir", str(tmp_path / "run"),
                                    "--set", "algo.kwargs={alpha: 2.0}"])
    assert out.exit_code != 0
    assert "MunchausenDQN(spaces, settings, device, reducer, **algo.kwargs) failed" in out.output
    assert "0 <= alpha <= 1" in out.output
