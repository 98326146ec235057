"""Components of one's own by import path: an algorithm, a network and an env wrapper train,
resume exactly and load; broken ones are refused before training, naming what is wrong."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

import hpcrl
from hpcrl.algorithms import algorithm_kind
from hpcrl.cli import main
from hpcrl.config.loader import ConfigError
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

sys.path.insert(0, str(Path(__file__).parent / "placement" / "mpi"))  # the broken components
sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))  # the README's

PLUGINS = {"algo": {"name": "custom_components:KLPenaltyPPO", "kwargs": {"target_kl": 0.02}},
           "actor": {"network": "custom_components:SquashEncoder",
                     "network_kwargs": {"width": 24}, "hidden_sizes": [64]},
           "env": {"wrappers": [{"custom_components:TimePenalty": {"penalty": 0.5}}]}}


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.timeout(300)
def test_a_yaml_of_plugins_trains_learns_evaluates_and_loads(tmp_path):
    run = tmp_path / "run"
    out = invoke("train", write(tmp_path, PLUGINS), "--run-dir", run,
                 "--set", "train.total_env_steps=50000", "--set", "train.eval_episodes=5",
                 "--set", "train.tensorboard=false")
    assert out.exit_code == 0, out.output
    header, *rows = (run / "progress.csv").read_text().splitlines()
    cols = header.split(",")
    returns = [float(r.split(",")[cols.index("episode_return_mean")]) for r in rows]
    betas = {float(r.split(",")[cols.index("kl_beta")]) for r in rows}
    # the wrapper takes 0.5 off each reward: 500 steps earn 250
    assert returns[-1] > 3 * returns[0] and returns[-1] >= 60, returns[::10]
    assert len(betas) > 1, "beta adapts to the KL"
    policy = hpcrl.load_policy(run)
    assert isinstance(policy.pi_encoder, sys.modules["custom_components"].SquashEncoder)
    assert policy.pi_encoder.features == 24
    action = policy(torch.zeros(4))
    assert int(action) in (0, 1)


def test_a_plugin_run_resumes_exactly(tmp_path, tiny_overrides):
    sets = tiny_overrides + ["algo.lr_schedule=constant", "algo.ppo.clip_schedule=constant",
                             "train.total_env_steps=1024", "train.checkpoint_every=4"]
    whole = hpcrl.train(PLUGINS, sets=sets, run_dir=tmp_path / "whole", console=None)
    assert whole.run_dir == tmp_path / "whole" and not whole.preempted
    hpcrl.train(PLUGINS, sets=sets[:-2] + ["train.total_env_steps=512",
                                          "train.checkpoint_every=4"],
                run_dir=tmp_path / "cut", console=None)
    hpcrl.resume(tmp_path / "cut", sets=["train.total_env_steps=1024"], console=None)
    a = load_checkpoint(RunDir(tmp_path / "whole").checkpoint_path)
    b = load_checkpoint(RunDir(tmp_path / "cut").checkpoint_path)
    for key, value in a["policy"]["state_dict"].items():
        assert torch.equal(value, b["policy"]["state_dict"][key]), key
    beta = a["placement"]["updater"]["algorithm"]["beta"]
    assert beta == b["placement"]["updater"]["algorithm"]["beta"] and beta != 1.0


def test_classes_given_in_python_are_recorded_by_import_path(tmp_path, tiny_overrides):
    import custom_components as lab

    config = hpcrl.make_config({"algo": {"name": lab.KLPenaltyPPO},
                                "actor": {"network": lab.SquashEncoder},
                                "env": {"wrappers": [lab.TimePenalty,
                                                     {lab.TimePenalty: {"penalty": 2.0}}]}},
                               sets=tiny_overrides)
    assert config.algo.name == "custom_components:KLPenaltyPPO"
    assert algorithm_kind(config.algo.name) == "ppo"
    assert config.env.wrappers == ["custom_components:TimePenalty",
                                   {"custom_components:TimePenalty": {"penalty": 2.0}}]
    result = hpcrl.train(config, run_dir=tmp_path / "run", console=None)
    saved = yaml.safe_load((result.run_dir / "config.yaml").read_text())
    assert saved["actor"]["network"] == "custom_components:SquashEncoder"


@pytest.mark.parametrize("sets,needle", [
    (["algo.name=hpcrl_brokenplugin:X"],
     "config key 'algo.name' ('hpcrl_brokenplugin:X'): importing module 'hpcrl_brokenplugin' "
     "failed: ModuleNotFoundError: No module named 'hpcrl_no_such_dependency'"),
    (["algo.name=hpcrl_testplugins:Missing"],
     "module 'hpcrl_testplugins' has no attribute 'Missing'"),
    (["algo.name=hpcrl_testplugins:NotAnAlgorithm"],
     "is not a subclass of hpcrl.OnPolicyAlgorithm"),
    (["algo.name=hpcrl_testplugins:ContractOnly"],
     "ContractOnly derives from hpcrl.Algorithm, the contract both families implement, but "
     "from neither family's base; derive it from hpcrl.PPO, hpcrl.A2C, hpcrl.IMPALA or "
     "hpcrl.OnPolicyAlgorithm (on-policy; for an off-policy one, from hpcrl.DQN, hpcrl.SAC, "
     "hpcrl.TD3, hpcrl.DDPG, hpcrl.MPO or hpcrl.OffPolicyAlgorithm)"),
    (["algo.name=hpcrl_testplugins:NoLoss"], "NoLoss does not define loss"),
    (["algo.name=pop"], "must be one of ['ppo', 'a2c', 'impala', 'dqn', 'sac', 'td3', "
                        "'ddpg', 'mpo', 'mpc'] or the import path 'module:Class'"),
    (["algo.name=custom_components:KLPenaltyPPO", "algo.kwargs={target: 1}"],
     "custom_components:KLPenaltyPPO takes no argument 'target' (it takes: target_kl)"),
    (["algo.kwargs={target_kl: 1}"], "'algo.kwargs' is for plug-in algorithms"),
    (["actor.network_kwargs={width: 3}"], "'actor.network_kwargs' is for a network of your own"),
    (["env.wrappers=[hpcrl_testplugins:Helpless]"],
     "hpcrl_testplugins:Helpless needs argument 'required'"),
    (["env.wrappers=[3]"], "each entry is 'module:Class'"),
    (["actor.network=custom_components:SquashEncoder", "algo.name=dqn"],
     "algo.name=dqn's Q-networks and policies are built from actor.hidden_sizes"),
    (["actor.network=custom_components:SquashEncoder", "actor.encoder=nature_cnn"],
     "'actor.network' and 'actor.encoder' (nature_cnn) both name the first stage"),
])
def test_broken_components_are_refused_with_what_is_wrong(sets, needle):
    with pytest.raises(ConfigError) as err:
        hpcrl.make_config(None, sets)
    assert needle in str(err.value)


@pytest.mark.parametrize("sets,needle", [
    (["actor.network=hpcrl_testplugins:NoFeatures"], "needs an int attribute 'features'"),
    (["actor.network=hpcrl_testplugins:WrongWidth"],
     "forward must return float features [B, features] = [2, 64] for a batch of 2, got (2, 3)"),
    (["env.wrappers=[hpcrl_testplugins:not_a_wrapper]"], "returned str, not a gymnasium.Env"),
    (["actor.network=custom_components:SquashEncoder", "env.id=Blackjack-v1"],
     "a network of your own takes Box observations"),
])
def test_components_that_break_their_contract_stop_the_cli_in_one_line(tmp_path, sets, needle):
    args = ["train", "--run-dir", str(tmp_path / "run")]
    for item in sets:
        args += ["--set", item]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert needle in out.output
    assert not (tmp_path / "run" / "progress.csv").exists()
