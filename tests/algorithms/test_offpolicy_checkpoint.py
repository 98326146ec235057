"""Off-policy runs: a killed and resumed run ends exactly like an uninterrupted one (replay
contents included), and their policies load and evaluate like on-policy ones."""
import json

import pytest
import torch
from click.testing import CliRunner
from kill_resume import rows, whole_then_killed_and_resumed

import hpcrl
from hpcrl.cli import main
from hpcrl.config import ConfigError, from_dict
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic
from hpcrl.runtime.run_dir import RunDir

TINY = ["actor.hidden_sizes=[16,16]", "algo.num_steps=25", "replay.batch_size=16",
        "replay.learning_starts=60", "replay.train_freq=3", "replay.gradient_steps=2",
        "train.total_env_steps=800", "train.checkpoint_every=4", "train.eval_episodes=0",
        "train.tensorboard=false", "algo.lr_schedule=linear"]
CASES = {
    "dqn-prioritized-3-step": ["algo.name=dqn", "env.num_envs=2", "replay.prioritized=true",
                               "replay.n_step=3", "replay.target_update_interval=5",
                               "replay.tau=1.0"],
    "sac": ["algo.name=sac", "env.id=Pendulum-v1", "env.num_envs=2"],
    "td3-ou": ["algo.name=td3", "env.id=Pendulum-v1", "env.num_envs=1",
               "algo.td3.action_noise=ornstein_uhlenbeck"],
    "mpo": ["algo.name=mpo", "env.id=Pendulum-v1", "env.num_envs=1",
            "algo.mpo.action_samples=4"],
    # planning: each env's plan and noise stream, and the model's replay statistics (the
    # checkpoint at update 8 falls 240 steps into each env's run: mid-episode, mid-plan)
    "mpc-pddm": ["algo.name=mpc", "env.id=Pendulum-v1", "env.num_envs=2", "algo.num_steps=30",
                 "algo.mpc.planner=pddm", "algo.mpc.ensemble_size=2", "algo.mpc.horizon=4",
                 "algo.mpc.candidates=16", "algo.mpc.iterations=2"],
    # hindsight replay: 50-step episodes, running ones and finished ones at the checkpoint
    "sac-her-future": ["algo.name=sac", "env.id=hpcrl.tasks:PointReach-v0", "env.num_envs=2",
                       "replay.her_strategy=future"],
}


def assert_same_tensors(a, b, where=""):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_tensors(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize("case", list(CASES))
def test_killed_and_resumed_offpolicy_run_ends_exactly_like_a_whole_one(tmp_path, monkeypatch,
                                                                        case):
    cfg = from_dict({}, TINY + CASES[case])
    whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 10)
    run = RunDir(tmp_path / "cut")  # killed after the checkpoint at update 8 and two more rows
    whole = load_checkpoint(RunDir(tmp_path / "whole").checkpoint_path)
    cut = load_checkpoint(run.checkpoint_path)
    assert_same_tensors(whole["policy"]["state_dict"], cut["policy"]["state_dict"], "policy")
    learner_whole = whole["placement"]["updater"]["learner"]
    learner_cut = cut["placement"]["updater"]["learner"]
    assert_same_tensors(learner_whole["algorithm"], learner_cut["algorithm"], "algorithm")
    assert_same_tensors(learner_whole["replay"], learner_cut["replay"], "replay")
    assert learner_whole["replay"]["size"] > 0
    assert rows(tmp_path / "whole") == rows(tmp_path / "cut")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("algo, env, check", [
    ("dqn", "CartPole-v1", lambda a: a.dtype == torch.int64 and a.shape == ()),
    ("sac", "Pendulum-v1", lambda a: a.shape == (1,) and -2.0 <= float(a) <= 2.0),
    ("ddpg", "Pendulum-v1", lambda a: a.shape == (1,) and -2.0 <= float(a) <= 2.0),
])
def test_offpolicy_runs_train_evaluate_and_load_from_the_cli(tmp_path, algo, env, check):
    run = tmp_path / "run"
    sets = [x for o in TINY + [f"algo.name={algo}", f"env.id={env}", "env.num_envs=1",
                               "train.eval_episodes=1"] for x in ("--set", o)]
    out = invoke("train", "--run-dir", run, *sets)
    assert out.exit_code == 0, out.output
    header = (run / "progress.csv").read_text().splitlines()[0].split(",")
    assert "grad_norm" in header and ("q_loss" if algo == "dqn" else "critic_loss") in header
    result = json.loads(invoke("eval", run, "--episodes", 2, "--json").output)
    assert result["episodes"] == 2 and len(result["returns"]) == 2
    policy = hpcrl.load_policy(run)
    obs = torch.zeros(4 if env == "CartPole-v1" else 3)
    action = policy(obs)
    assert check(action), action
    assert policy(obs.expand(5, -1)).shape[0] == 5


def test_wrong_action_space_and_normalisation_name_the_key(tmp_path):
    cfg = from_dict({}, ["algo.name=dqn", "env.id=Pendulum-v1", *TINY])
    with pytest.raises(ConfigError, match="config key 'algo.name': dqn needs a Discrete"):
        Trainer(cfg, RunDir(tmp_path / "a"), console=None)
    with pytest.raises(ConfigError, match="'env.normalize_obs' is not supported"):
        from_dict({}, ["algo.name=sac", "env.id=Pendulum-v1", "env.normalize_obs=true"])
    with pytest.raises(ConfigError, match="'replay.gradient_steps' must be > 0, or -1"):
        from_dict({}, ["algo.name=sac", "replay.gradient_steps=-2"])
    with pytest.raises(ConfigError, match="'replay.tau' must lie in"):
        from_dict({}, ["replay.tau=1.5"])


def test_a_checkpoint_of_the_earlier_serial_form_resumes(tmp_path, monkeypatch):
    """A one-process off-policy run checkpointed before serial runs were jobs of one rank
    held its learner's state beside its collector's: it resumes as it did, exactly."""
    def written_then(cut):
        run = RunDir(cut)
        state = load_checkpoint(run.checkpoint_path)
        placement = state["placement"]
        assert not any(placement["updater"]["row"].values())  # taken between two updates
        state["placement"] = {"learner": placement["updater"]["learner"],
                              "collectors": placement["collectors"]}  # the form of then
        save_atomic(state, run.checkpoint_path)

    cfg = from_dict({}, TINY + CASES["dqn-prioritized-3-step"])
    whole, cut = whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 10, written_then)
    assert_same_tensors(load_checkpoint(RunDir(whole).checkpoint_path)["policy"],
                        load_checkpoint(RunDir(cut).checkpoint_path)["policy"], "policy")
