"""An algorithm of either family with keys of its own is one module: the examples
(examples/reinforce_baseline.py, on-policy; examples/clipped_double_dqn.py, off-policy)
declare their section on the class, are named by ``--set algo.name=module:Class`` as a
user does, learn CartPole on a serial run with their own keys set, save and reload those
keys with the run, and have the keys refused where they are wrong, before training."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

import hpcrl
from hpcrl.algorithms import algorithm_kind, algorithm_type, make_algorithm
from hpcrl.algorithms.own_section import own_section
from hpcrl.build import env_spaces
from hpcrl.cli import main
from hpcrl.config import from_dict
from hpcrl.config.loader import ConfigError

EXAMPLES = Path(__file__).parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # the examples' modules, as PYTHONPATH=examples gives them

REINFORCE = "reinforce_baseline:ReinforceBaseline"
CDQ = "clipped_double_dqn:ClippedDoubleDQN"


def returns(run: Path) -> list[float]:
    with open(run / "progress.csv") as f:
        return [float(r["episode_return_mean"]) for r in csv.DictReader(f)
                if r["episode_return_mean"] not in ("", "nan")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,section,sets", [
    (REINFORCE, "reinforce", ["algo.reinforce.baseline=value",
                              "algo.reinforce.clip_weights=5.0",
                              "train.total_env_steps=15000"]),
    (CDQ, "cdq", ["algo.cdq.min_weight=0.75", "algo.cdq.loss=huber",
                  "actor.hidden_sizes=[64,64]", "train.total_env_steps=12288"]),
], ids=["reinforce", "clipped-double-dqn"])
def test_a_plugin_with_its_own_section_learns_cartpole_on_a_serial_run(tmp_path, name,
                                                                       section, sets):
    run = tmp_path / "run"
    args = ["train", "--run-dir", str(run)]
    for item in [f"algo.name={name}", "train.eval_episodes=0", "train.tensorboard=false",
                 *sets]:
        args += ["--set", item]
    out = CliRunner().invoke(main, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    curve = returns(run)
    # from about 20 (random play) to over 100 on this budget; the margin is for a loaded box
    assert curve[-1] >= 60 and curve[-1] >= 2 * curve[0], curve
    saved = yaml.safe_load((run / "config.yaml").read_text())["algo"]
    own = {s.split("=")[0].split(".")[2]: yaml.safe_load(s.split("=")[1])
           for s in sets if s.startswith(f"algo.{section}.")}
    assert own.items() <= saved[section].items()
    again = from_dict(yaml.safe_load((run / "config.yaml").read_text()), saved=True)
    assert own_section(again.algo) == algorithm_type(name).section_keys(**saved[section])
    assert hpcrl.load_policy(run) is not None


def test_the_own_section_holds_its_defaults_and_is_read_through_the_class():
    config = from_dict({}, [f"algo.name={CDQ}"])
    cls = algorithm_type(CDQ)
    assert cls.section_name() == "cdq" and cls.runs_as() == "dqn"
    assert own_section(config.algo) == cls.section_keys()  # the dataclass's defaults
    own = own_section(config.algo)
    assert cls.epsilon_keys(own) is own  # explores with its keys
    assert config.replay.n_step == 3  # DQN's recipe: the built-in it runs as
    reinforce = from_dict({}, [f"algo.name={REINFORCE}"])
    assert algorithm_kind(reinforce.algo.name) == "a2c" and reinforce.algo.gae_lambda == 1.0
    assert own_section(reinforce.algo).baseline == "value"


@pytest.mark.parametrize("sets,says", [
    ([f"algo.name={REINFORCE}", "algo.reinforce.baseline=critic"],
     "config key 'algo.reinforce.baseline' must be one of ['value', 'mean', 'none']"),
    ([f"algo.name={REINFORCE}", "algo.reinforce.clip_weights=-1"],
     "config key 'algo.reinforce.clip_weights' must be > 0"),
    ([f"algo.name={REINFORCE}", "algo.reinforce.clip=1"],
     "unknown config key 'algo.reinforce.clip'"),
    ([f"algo.name={CDQ}", "algo.cdq.min_weight=1.5"],
     "config key 'algo.cdq.min_weight' must be in [0, 1], got 1.5"),
    ([f"algo.name={CDQ}", "algo.cdq.exploration_final_eps=2"],
     "algo.cdq.exploration_final_eps"),  # DQN's range rules hold for its keys here too
    ([f"algo.name={CDQ}", "algo.dqn.double_q=true"],
     "config key 'algo.dqn.double_q' is read by dqn (and its plug-ins) only"),
    (["algo.name=dqn", "algo.cdq.min_weight=0.5"], "unknown config key 'algo.cdq.min_weight'"),
])
def test_wrong_keys_of_an_own_section_are_refused_before_training(sets, says):
    with pytest.raises(ConfigError) as err:
        from_dict({}, sets)
    assert says in str(err.value)


def test_the_clipped_target_is_the_minimum_of_the_two_target_networks():
    config = from_dict({}, [f"algo.name={CDQ}", "algo.cdq.loss=mse", "actor.hidden_sizes=[16]"])
    spaces = env_spaces(config)
    cdq = make_algorithm(config, spaces)
    assert list(cdq.segments) == ["q", "q2"]
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.normal(size=(16, 4)), dtype=torch.float32)
    batch = hpcrl.ReplayBatch(obs=obs, actions=torch.as_tensor(rng.integers(0, 2, 16)),
                              rewards=torch.ones(16), discounts=torch.full((16,), 0.9),
                              next_obs=obs + 0.1, weights=None, indices=np.arange(16))
    with torch.no_grad():
        loss, stats = cdq.loss(batch)
        n1 = cdq.target_q.module.q_values(batch.next_obs)
        n2 = cdq.target_q2.module.q_values(batch.next_obs)
        best = torch.minimum(n1, n2).argmax(dim=1, keepdim=True)  # double_q off: DQN's default
        target = 1 + 0.9 * torch.minimum(n1.gather(1, best), n2.gather(1, best)).squeeze(1)
        taken = batch.actions.unsqueeze(1)
        q1 = cdq.q.q_values(obs).gather(1, taken).squeeze(1)
        q2 = cdq.q2.q_values(obs).gather(1, taken).squeeze(1)
        expected = ((q1 - target) ** 2 + (q2 - target) ** 2).mean()
    torch.testing.assert_close(loss, expected)
    assert set(stats) == set(cdq.stat_names)


def test_a_registered_algorithm_with_keys_of_its_own_is_one_module_and_one_line(monkeypatch):
    """The same declarations make a built-in: the class (here the example's, under a name
    of its own) and its line in the one registry; no config table changes."""
    import reinforce_baseline

    from hpcrl.algorithms import registry

    class Reinforce(reinforce_baseline.ReinforceBaseline):
        kind = "reinforce"  # a built-in names itself

    monkeypatch.setitem(registry.ALGORITHMS, "reinforce", Reinforce)  # the one line
    config = from_dict({}, ["algo.name=reinforce", "algo.reinforce.baseline=mean"])
    assert own_section(config.algo) == reinforce_baseline.ReinforceConfig(baseline="mean")
    assert isinstance(make_algorithm(config, env_spaces(config)), Reinforce)
    with pytest.raises(ConfigError, match="algo.reinforce.clip_weights' must be > 0"):
        from_dict({}, ["algo.name=reinforce", "algo.reinforce.clip_weights=0"])
    with pytest.raises(ConfigError, match="unknown config key 'algo.reinforce.baseline'"):
        from_dict({}, ["algo.name=ppo", "algo.reinforce.baseline=mean"])
