"""``actor.compute_dtype=bfloat16``: image encoders compute under autocast while weights,
gradients, features and checkpoints stay float32; keys that cannot apply are refused."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

import hpcrl
from hpcrl.build import make_actor
from hpcrl.cli import main
from hpcrl.config.loader import ConfigError, from_dict
from hpcrl.envs.obs_format import obs_format
from hpcrl.envs.vector import spaces_of
from hpcrl.models.encoders import make_encoder
from hpcrl.numerics import precision

FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (10, 10, 4), bool)
BF16 = torch.bfloat16


def frames(space: gym.Space, n: int) -> torch.Tensor:
    rng = np.random.default_rng(0)
    if space.dtype == bool:
        return torch.from_numpy(rng.random((n,) + space.shape) < 0.3)
    return torch.from_numpy(rng.integers(0, 256, (n,) + space.shape, dtype=np.uint8))


def twins(name: str, space: gym.Space) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The same encoder (same weights) in float32 and in bfloat16."""
    torch.manual_seed(0)
    full = make_encoder(name, obs_format(space), 64)
    half = make_encoder(name, obs_format(space), 64, compute_dtype=BF16)
    half.load_state_dict(full.state_dict())
    return full, half


@pytest.mark.parametrize("name,space", [("nature_cnn", FRAMES), ("impala_resnet", MINATAR)])
def test_bfloat16_encoders_give_float32_features_and_gradients_close_to_float32(name, space):
    full, half = twins(name, space)
    batch = frames(space, 16)
    seen = []
    convs = [m for m in half.modules() if isinstance(m, torch.nn.Conv2d)]
    for conv in (convs[0], convs[-1]):
        conv.register_forward_hook(lambda m, args, out: seen.append(out.dtype))
    want, got = full(batch), half(batch)
    assert seen == [BF16, BF16] and got.dtype == torch.float32
    assert (got - want).abs().max() < 0.03 * want.abs().max()
    with torch.no_grad():  # acting batches take the same path
        assert half(batch).dtype == torch.float32
    (want ** 2).sum().backward()
    (got ** 2).sum().backward()
    for (key, a), (_, b) in zip(full.named_parameters(), half.named_parameters(), strict=False):
        assert a.dtype == b.dtype == b.grad.dtype == torch.float32, key
        cosine = torch.nn.functional.cosine_similarity(a.grad.flatten(), b.grad.flatten(), 0)
        assert cosine > 0.98, (key, cosine)


def test_the_compute_dtype_is_not_part_of_the_saved_state():
    full, half = twins("nature_cnn", FRAMES)
    assert full.state_dict().keys() == half.state_dict().keys()
    assert all(t.dtype == torch.float32 for t in half.state_dict().values())


def test_acting_and_learning_agree_on_log_probs_in_bfloat16():
    """Collectors act in the same format as the learner, so the first ratio of an update
    stays near 1 (acting batches of 8 and learning batches differ only in rounding)."""
    cfg = from_dict({}, ["actor.encoder=nature_cnn", "actor.hidden_sizes=[]",
                         "actor.compute_dtype=bfloat16"])
    actor = make_actor(cfg, spaces_of(FRAMES, gym.spaces.Discrete(6), "frames"))
    batch = frames(FRAMES, 32)
    noise = torch.rand(32)
    with torch.inference_mode():
        acted = [actor.step(part, n)
                 for part, n in zip(batch.split(8), noise.split(8), strict=False)]
    actions, logp_acted = (torch.cat([step[i] for step in acted]) for i in (0, 1))
    logp_learned, _, _ = actor.evaluate(batch, actions)
    assert (logp_learned - logp_acted).abs().max() < 0.02


def test_bfloat16_on_an_mlp_encoder_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="compute_dtype.*actor.encoder=nature_cnn or "
                                          "impala_resnet.*float32"):
        from_dict({}, ["actor.compute_dtype=bfloat16"])
    with pytest.raises(ConfigError, match="compute_dtype"):
        from_dict({}, ["actor.encoder=nature_cnn", "actor.compute_dtype=float16"])
    vectors = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (3,)), "b": gym.spaces.Discrete(4)})
    with pytest.raises(ConfigError, match=r"'actor.encoder' \(nature_cnn\) takes image "
                                          r"observations.*use actor.encoder=mlp"):
        make_encoder("nature_cnn", obs_format(vectors), 64, compute_dtype=BF16)


def test_a_dict_observation_runs_its_image_key_in_bfloat16():
    space = gym.spaces.Dict({"frame": FRAMES, "speed": gym.spaces.Box(-1, 1, (2,))})
    fmt = obs_format(space)
    encoder = make_encoder("nature_cnn", fmt, 32, compute_dtype=BF16)
    assert [getattr(e, "compute_dtype", None) for e in encoder.encoders] == [BF16, None]
    batch = torch.from_numpy(fmt.carry_each([space.sample() for _ in range(2)]))
    assert encoder(batch).dtype == torch.float32


def test_a_device_without_native_bfloat16_is_warned_once(monkeypatch):
    monkeypatch.setattr(precision, "_warned", set())
    monkeypatch.setattr(precision, "native_bfloat16", lambda device: False)
    _, half = twins("nature_cnn", FRAMES)
    with pytest.warns(RuntimeWarning, match="without native bfloat16.*compute_dtype=float32"):
        half(frames(FRAMES, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        half(frames(FRAMES, 2))


@pytest.mark.timeout(300)
def test_a_bfloat16_cnn_agent_trains_resumes_and_its_policy_loads_in_float32(tmp_path):
    run = tmp_path / "run"
    common = ["--set", "env.id=MinAtar/Breakout-v1", "--set", "actor.encoder=impala_resnet",
              "--set", "actor.hidden_sizes=[]", "--set", "actor.compute_dtype=bfloat16",
              "--set", "env.num_envs=4", "--set", "algo.num_steps=32",
              "--set", "algo.ppo.minibatch_size=64", "--set", "algo.ppo.num_epochs=2",
              "--set", "train.eval_episodes=1", "--set", "train.tensorboard=false"]
    pytest.importorskip("minatar")
    out = CliRunner().invoke(main, ["train", "--run-dir", str(run), *common,
                                    "--set", "train.total_env_steps=256"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    floats = [t for t in _tensors(ckpt) if t.is_floating_point()]
    assert floats and all(t.dtype in (torch.float32, torch.float64) for t in floats)
    resumed = CliRunner().invoke(main, ["train", "--resume", str(run),
                                        "--set", "train.total_env_steps=384"],
                                 catch_exceptions=False)
    assert resumed.exit_code == 0, resumed.output
    policy = hpcrl.load_policy(run)
    assert policy.pi_encoder.compute_dtype == BF16  # as trained
    as_float32 = make_actor(from_dict({}, ["env.id=MinAtar/Breakout-v1",
                                           "actor.encoder=impala_resnet",
                                           "actor.hidden_sizes=[]"]),
                            spaces_of(MINATAR, gym.spaces.Discrete(3), "minatar"))
    as_float32.load_state_dict(policy.state_dict())
    obs = frames(MINATAR, 16)
    with torch.no_grad():
        (want, values), (got, got_values) = (
            net.dist_and_value(obs)[:2] for net in (as_float32, policy))
    assert got.dtype == want.dtype == torch.float32
    assert (got_values - values).abs().max() <= 0.03 * values.abs().max() + 1e-3
    assert (got - want).abs().max() <= 0.03 * want.abs().max() + 1e-3


def _tensors(tree: object):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from _tensors(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _tensors(value)


def test_dqn_q_network_takes_bfloat16_and_its_collectors_act_with_it():
    from hpcrl.algorithms import make_policy
    from hpcrl.models.acting import make_engine

    cfg = from_dict({}, ["algo.name=dqn", "actor.encoder=nature_cnn", "actor.hidden_sizes=[]",
                         "actor.compute_dtype=bfloat16"])
    q = make_policy(cfg, spaces_of(FRAMES, gym.spaces.Discrete(6), "frames"))
    assert q.encoder.compute_dtype == BF16
    batch = frames(FRAMES, 3).numpy()
    values = q.q_values(torch.from_numpy(batch))
    assert values.dtype == torch.float32
    assert np.array_equal(make_engine(q).step(batch).actions, q(batch).numpy())
