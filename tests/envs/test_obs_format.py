"""Integer and tuple observations: carried as integers, one-hot encoded inside the network;
unsupported spaces and missing env packages refused in one line."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.cli import main
from hpcrl.config.loader import load_config
from hpcrl.envs import vector as envs_module
from hpcrl.envs.obs_format import UnsupportedSpace, obs_format
from hpcrl.envs.vector import UnsupportedEnv, env_id_problem, spaces_of

BLACKJACK = gym.spaces.Tuple((gym.spaces.Discrete(32), gym.spaces.Discrete(11),
                              gym.spaces.Discrete(2)))


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_discrete_is_carried_as_an_integer_and_one_hot_encoded():
    fmt = obs_format(gym.spaces.Discrete(5, start=2))
    assert fmt.shape == (1,) and fmt.dtype == "int64" and fmt.features == 5
    carried = fmt.carry(np.array([2, 6, 4]))
    assert carried.dtype == np.int64 and carried.shape == (3, 1)
    features = fmt.encode(torch.from_numpy(carried))
    assert torch.equal(features, torch.eye(5)[[0, 4, 2]])


def test_tuple_of_discrete_and_box_is_concatenated_in_order():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,)),
                              gym.spaces.MultiDiscrete([2, 4])))
    fmt = obs_format(space)
    assert fmt.shape == (5,) and fmt.dtype == "float32" and fmt.features == 3 + 2 + 2 + 4
    batch = (np.array([1, 2]), np.array([[0.5, -0.5], [0.1, 0.2]], np.float32),
             np.array([[1, 3], [0, 0]]))
    carried = fmt.carry(batch)
    expected = torch.tensor([[0, 1, 0, 0.5, -0.5, 0, 1, 0, 0, 0, 1],
                             [0, 0, 1, 0.1, 0.2, 1, 0, 1, 0, 0, 0]])
    assert torch.allclose(fmt.encode(torch.from_numpy(carried)), expected)
    assert np.allclose(fmt.encode_numpy(carried), expected.numpy())


def test_numpy_and_torch_encodings_agree_on_blackjack():
    fmt = obs_format(BLACKJACK)
    assert fmt.dtype == "int64" and fmt.features == 45
    rng = np.random.default_rng(0)
    carried = np.stack([rng.integers(0, 32, 64), rng.integers(0, 11, 64),
                        rng.integers(0, 2, 64)], axis=1)
    assert np.array_equal(fmt.encode_numpy(carried), fmt.encode(torch.from_numpy(carried)).numpy())
    one, single = fmt.as_batch((14, 3, 0))
    assert single and one.tolist() == [[14, 3, 0]]
    many, single = fmt.as_batch(carried[:4])
    assert not single and many.shape == (4, 3)


def test_rollout_keeps_integer_observations_in_their_dtype():
    layout = RolloutLayout(4, 3, (3,), (), "int64")
    rollout = layout.new()
    assert rollout.obs.dtype == np.int64 and rollout.obs.shape == (4, 3, 3)
    assert rollout.data.dtype == np.float32  # one buffer on the wire, as for Box rollouts
    rollout.obs[:] = 2 ** 40 + 7  # beyond float32's exact integers: kept exactly
    rollout.rewards[:] = 1.5
    assert (rollout.obs == 2 ** 40 + 7).all() and (rollout.rewards == 1.5).all()
    copy = layout.new()
    copy.data[:] = rollout.data  # what a receive does
    assert (copy.obs == 2 ** 40 + 7).all()


@pytest.mark.parametrize("space,fix", [
    (gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Box(0, 1, (2,))})}),
     "FlattenObservation"),
    (gym.spaces.Tuple((gym.spaces.Dict({"b": gym.spaces.Box(0, 1, (2,))}),)),
     "FlattenObservation"),
    (gym.spaces.Dict({"a": gym.spaces.Text(5)}), "an observation wrapper"),
    (gym.spaces.Text(5), "an observation wrapper"),
])
def test_unsupported_spaces_are_refused_with_the_wrapper_that_fixes_them(space, fix):
    with pytest.raises(UnsupportedSpace, match=fix):
        obs_format(space)
    with pytest.raises(UnsupportedEnv, match="env 'X'"):
        spaces_of(space, gym.spaces.Discrete(2), "X")


def test_frozenlake_trains_and_its_policy_takes_the_raw_integer(tmp_path):
    run = tmp_path / "run"
    out = invoke("train", "--run-dir", run, "--set", "env.id=FrozenLake-v1",
                 "--set", "train.total_env_steps=512", "--set", "train.eval_episodes=1")
    assert out.exit_code == 0, out.output
    import hpcrl
    policy = hpcrl.load_policy(run)
    assert policy(0).dim() == 0 and policy(np.array([0, 5, 14])).shape == (3,)
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["placement"]["collectors"][0]["obs"].dtype == torch.int64


def test_normalising_one_hot_observations_is_refused(tmp_path):
    out = invoke("train", "--run-dir", tmp_path / "r", "--set", "env.id=FrozenLake-v1",
                 "--set", "env.normalize_obs=true")
    assert out.exit_code != 0
    assert "env.normalize_obs" in out.output and "Traceback" not in out.output
    assert len(out.output.strip().splitlines()) == 1


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_continuous_off_policy_agents_replay_integer_observations_one_hot(tmp_path, algo):
    import hpcrl_obs_envs  # noqa: F401  registers a Discrete-observation, Box-action env

    run = tmp_path / "run"
    out = invoke("train", "--run-dir", run, "--set",
                 "env.id=hpcrl_obs_envs:DiscreteObsBoxAction-v0", "--set", f"algo.name={algo}",
                 "--set", "train.total_env_steps=300", "--set", "algo.num_steps=100", "--set",
                 "replay.learning_starts=100", "--set", "actor.hidden_sizes=[16]", "--set",
                 "train.eval_episodes=1")
    assert out.exit_code == 0, out.output
    import hpcrl
    policy = hpcrl.load_policy(run)
    assert policy.trunk[0].in_features == 5  # Discrete(5), one-hot
    assert policy(3).shape == (1,) and policy(np.array([0, 4])).shape == (2, 1)
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["placement"]["updater"]["learner"]["replay"]["obs"].dtype == torch.int64


def test_dqn_replays_integer_observations_and_its_policy_takes_them(tmp_path):
    run = tmp_path / "run"
    out = invoke("train", "--run-dir", run, "--set", "env.id=Taxi-v4", "--set",
                 "algo.name=dqn", "--set", "train.total_env_steps=1024", "--set",
                 "train.eval_episodes=1")
    assert out.exit_code == 0, out.output
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    replay = ckpt["placement"]["updater"]["learner"]["replay"]
    assert replay["obs"].dtype == torch.int64 and replay["next_obs"].dtype == torch.int64
    import hpcrl
    policy = hpcrl.load_policy(run)
    assert policy(17).dim() == 0 and policy([1, 2, 3]).shape == (3,)


def test_missing_env_package_names_the_env_module_and_install(monkeypatch, tmp_path):
    real_import = envs_module.importlib.import_module

    def without_mujoco(name, *args):
        if name.startswith("gymnasium.envs.mujoco"):
            raise ModuleNotFoundError("No module named 'mujoco'", name="mujoco")
        return real_import(name, *args)

    monkeypatch.setattr(envs_module.importlib, "import_module", without_mujoco)
    problem = env_id_problem("HalfCheetah-v5")
    assert "HalfCheetah-v5" in problem and "'mujoco'" in problem
    assert 'pip install "hpcrl[mujoco]"' in problem
    out = invoke("train", "--run-dir", tmp_path / "r", "--set", "env.id=HalfCheetah-v5")
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert 'pip install "hpcrl[mujoco]"' in out.output


def test_missing_module_of_a_plugin_env_is_named(tmp_path):
    gym.register("HpcrlTestMissing-v0", entry_point="hpcrl_no_such_pkg.envs:Env")
    try:
        problem = env_id_problem("HpcrlTestMissing-v0")
    finally:
        del gym.registry["HpcrlTestMissing-v0"]
    assert "'hpcrl_no_such_pkg'" in problem and "HpcrlTestMissing-v0" in problem


def test_config_of_a_supported_integer_env_loads():
    assert load_config(None, ["env.id=Taxi-v4"]).env.id == "Taxi-v4"
