"""Dict observations: packed into one uint8 row with every key in its own dtype, one encoder
per key, learned from serially and on the presets, and taken raw by saved policies
(tests/placement/mpi/hpcrl_testenvs.py: DictMatch, an image, a float and a Discrete)."""
import json

import gymnasium as gym
import hpcrl_testenvs  # noqa: F401  registers DictMatch
import numpy as np
import pytest
import torch
from mpirun import column, train

import hpcrl
from hpcrl.config import from_dict
from hpcrl.envs.obs_format import format_from_saved, obs_format
from hpcrl.models.encoders import DictEncoder, ImpalaResNet, make_encoder
from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.run_dir import RunDir

ENV = "hpcrl_testenvs:DictMatch-v0"


def observations(n: int) -> list[dict]:
    env = gym.make(ENV)
    out = [env.reset(seed=0)[0]]
    out += [env.step(0)[0] for _ in range(n - 1)]
    return out


def test_dict_rows_keep_each_key_in_its_dtype_and_come_back_exactly():
    fmt = obs_format(gym.make(ENV).observation_space)
    assert fmt.dtype == "uint8" and fmt.packed
    # 64 image bytes, a float32 at offset 64, an int64 at 72: 80 bytes, not 3 x 4 x 66
    assert fmt.shape == (80,) and [k[2] for k in fmt.keys] == [0, 64, 72]
    obs = observations(5)
    rows = fmt.carry_each(obs)
    batched = fmt.carry({k: np.stack([np.asarray(o[k]) for o in obs]) for k in obs[0]})
    assert rows.dtype == np.uint8 and np.array_equal(rows, batched)
    keys = fmt.unpack(torch.from_numpy(rows))
    assert keys["image"].dtype == torch.uint8 and keys["sign"].dtype == torch.float32
    assert keys["phase"].dtype == torch.int64
    for i, o in enumerate(obs):
        assert np.array_equal(keys["image"][i].numpy(), o["image"])
        assert keys["sign"][i].item() == o["sign"][0] and keys["phase"][i].item() == o["phase"]
    torch.testing.assert_close(fmt.encode(torch.from_numpy(rows)),
                               torch.from_numpy(fmt.encode_numpy(rows)))
    assert fmt.encode(torch.from_numpy(rows)).shape == (5, 64 + 1 + 3)
    assert format_from_saved(json.loads(json.dumps(fmt.record()))) == fmt


def test_image_encoders_take_the_image_keys_and_mlp_takes_the_rest():
    fmt = obs_format(gym.make(ENV).observation_space)
    encoder = make_encoder("impala_resnet", fmt, 32)
    assert isinstance(encoder, DictEncoder)
    assert isinstance(encoder.encoders[0], ImpalaResNet) and encoder.features == 32 + 1 + 3
    out = encoder(torch.from_numpy(fmt.carry_each(observations(3))))
    assert out.shape == (3, 36) and torch.isfinite(out).all()


def test_a_dict_run_refuses_observation_normalisation_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="env.normalize_obs=false"):
        Trainer(from_dict({}, [f"env.id={ENV}", "env.normalize_obs=true"]), RunDir(tmp_path),
                console=None)


@pytest.mark.timeout(300)
def test_ppo_learns_from_two_keys_and_its_policy_takes_raw_dicts(tmp_path):
    sets = [f"env.id={ENV}", "train.total_env_steps=12288", "train.tensorboard=false",
            "train.eval_episodes=10"]
    Trainer(from_dict({}, sets), RunDir(tmp_path), console=None).train()
    returns = column(tmp_path, "episode_return_mean")
    evaluated = json.loads((tmp_path / "eval.json").read_text())["mean_return"]
    assert evaluated >= 7.0 and np.mean(returns[-3:]) > np.mean(returns[:2]) + 3, returns
    policy = hpcrl.load_policy(tmp_path)
    env = gym.make(ENV)
    hits = 0
    obs, _ = env.reset(seed=123)
    for _ in range(8):
        with torch.inference_mode():
            action = int(policy(obs))
        obs, reward, *_ = env.step(action)
        hits += reward
    assert hits >= 6
    batch = {k: np.stack([np.asarray(o[k]) for o in observations(4)]) for k in obs}
    with torch.inference_mode():
        assert policy(batch).shape == (4,)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo,encoder", [("ppo", "impala_resnet"), ("dqn", "mlp")])
def test_image_encoder_and_dqn_train_evaluate_and_resume_on_dicts(algo, encoder, tmp_path):
    sets = [f"env.id={ENV}", f"algo.name={algo}", f"actor.encoder={encoder}",
            "actor.features=32", "train.total_env_steps=2048", "train.tensorboard=false",
            "train.eval_episodes=2"]
    sets += (["replay.learning_starts=256", "replay.buffer_size=4096"] if algo == "dqn"
             else ["algo.ppo.num_epochs=2"])  # a ResNet step is dear on CPU: wiring, not learning
    Trainer(from_dict({}, sets), RunDir(tmp_path), console=None).train()
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["policy"]["obs_format"]["dtype"] == "uint8"
    resumed = resume_config(RunDir(tmp_path), ["train.total_env_steps=3072"])
    Trainer(resumed, RunDir(tmp_path), console=None, resume=True).train()
    assert column(tmp_path, "env_steps")[-1] >= 3072
    policy = hpcrl.load_policy(tmp_path)
    obs = observations(1)[0]
    with torch.inference_mode():
        assert int(policy(obs)) in range(4)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("preset,ranks,algo", [("impala", 3, "impala"), ("apex", 3, "dqn")])
def test_presets_with_collector_ranks_carry_dict_rows(preset, ranks, algo, tmp_path):
    sets = [f"scheme.preset={preset}", f"algo.name={algo}", f"env.id={ENV}",
            "train.total_env_steps=8192", "env.num_envs=4", "train.eval_episodes=2"]
    if algo == "dqn":
        sets += ["replay.learning_starts=512", "replay.buffer_size=8192"]
    train(ranks, tmp_path, sets, timeout=200)
    assert column(tmp_path, "env_steps")[-1] >= 8192
    result = json.loads((tmp_path / "eval.json").read_text())
    assert result["episodes"] == 2
