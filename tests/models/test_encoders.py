"""Image encoders: shapes, layouts, pixel scaling inside the network, uint8 end to end."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

import hpcrl
from hpcrl.build import make_actor, rollout_layout
from hpcrl.cli import main
from hpcrl.config.loader import ConfigError, from_dict
from hpcrl.envs.obs_format import obs_format
from hpcrl.envs.vector import spaces_of
from hpcrl.models.encoders import ImageInput, channels_last, make_encoder

FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)      # an Atari frame stack
MINATAR = gym.spaces.Box(0, 1, (10, 10, 4), bool)           # MinAtar's channels-last bools
RGB = gym.spaces.Box(0, 255, (96, 96, 3), np.uint8)         # CarRacing's frame


@pytest.mark.parametrize("space,last", [(FRAMES, False), (MINATAR, True), (RGB, True)])
def test_channels_are_found_from_the_space(space, last):
    assert channels_last(space.shape) is last
    assert channels_last(space.shape, "first") is False and channels_last(space.shape, "last")


@pytest.mark.parametrize("name,space", [("nature_cnn", FRAMES), ("nature_cnn", RGB),
                                        ("impala_resnet", FRAMES), ("impala_resnet", MINATAR)])
def test_encoders_end_in_the_configured_features(name, space):
    fmt = obs_format(space)
    encoder = make_encoder(name, fmt, 256)
    batch = torch.from_numpy(np.stack([space.sample() for _ in range(3)]))
    assert encoder(batch).shape == (3, 256) and encoder.features == 256


def test_integer_pixels_are_scaled_to_unit_range_inside_the_network():
    layer = ImageInput(obs_format(FRAMES))
    frames = torch.full((2, 4, 84, 84), 255, dtype=torch.uint8)
    assert torch.equal(layer(frames), torch.ones(2, 4, 84, 84))
    minatar = ImageInput(obs_format(MINATAR))
    assert minatar(torch.ones(1, 10, 10, 4, dtype=torch.bool)).shape == (1, 4, 10, 10)


def test_too_small_images_for_the_nature_cnn_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="too small for actor.encoder=nature_cnn.*impala_resnet"):
        make_encoder("nature_cnn", obs_format(MINATAR), 512)


def test_uint8_frames_stay_uint8_in_rollouts_and_are_4x_smaller_than_float32():
    cfg = from_dict({}, ["actor.encoder=nature_cnn", "actor.hidden_sizes=[]"])
    spaces = spaces_of(FRAMES, gym.spaces.Discrete(6), "frames")
    assert spaces.obs_format.dtype == "uint8"
    rollout = rollout_layout(cfg, spaces, 8).new()
    assert rollout.obs.dtype == np.uint8
    float_spaces = spaces_of(FRAMES, gym.spaces.Discrete(6), "frames", keep_integers=False)
    as_float = rollout_layout(cfg, float_spaces, 8).new()
    assert as_float.obs.nbytes == 4 * rollout.obs.nbytes
    actor = make_actor(cfg, spaces)
    assert actor(FRAMES.sample()).dim() == 0


def test_vector_only_off_policy_agents_refuse_image_encoders():
    with pytest.raises(ConfigError, match="actor.encoder.*sac"):
        from_dict({}, ["algo.name=sac", "env.id=Pendulum-v1", "actor.encoder=nature_cnn"])


def test_a_cnn_agent_trains_on_raw_frames_and_its_saved_policy_takes_them(tmp_path):
    run = tmp_path / "run"
    out = CliRunner().invoke(main, [
        "train", "--run-dir", str(run), "--set", "env.id=CarRacing-v3",
        "--set", "actor.encoder=nature_cnn", "--set", "actor.hidden_sizes=[]",
        "--set", "actor.shared_trunk=true", "--set", "env.num_envs=2",
        "--set", "algo.num_steps=32", "--set", "algo.ppo.minibatch_size=32",
        "--set", "algo.ppo.num_epochs=1", "--set", "train.total_env_steps=64",
        "--set", "train.eval_episodes=1", "--set", "env.kwargs={max_episode_steps: 20}"],
        catch_exceptions=False)
    assert out.exit_code == 0, out.output
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["placement"]["collectors"][0]["obs"].dtype == torch.uint8
    policy = hpcrl.load_policy(run)
    frame = RGB.sample()
    action = policy(frame)
    assert action.shape == (3,) and policy(np.stack([frame, frame])).shape == (2, 3)


def test_dqn_takes_an_image_encoder():
    cfg = from_dict({}, ["algo.name=dqn", "actor.encoder=nature_cnn", "actor.hidden_sizes=[]"])
    from hpcrl.algorithms import make_policy
    from hpcrl.models.acting import make_engine

    spaces = spaces_of(FRAMES, gym.spaces.Discrete(6), "frames")
    q = make_policy(cfg, spaces)
    frames = np.stack([FRAMES.sample() for _ in range(3)])
    engine = make_engine(q)
    assert np.array_equal(engine.step(frames).actions, q(frames).numpy())


def test_the_config_offers_every_registered_encoder_and_init_and_nothing_else():
    """Adding an encoder is its class, its IMAGE_ENCODERS entry and the config's Literal:
    the three agree, and make_encoder builds each one from the registry."""
    import typing

    from hpcrl.models.encoders import ENCODER_INITS, ENCODERS, IMAGE_ENCODERS
    from hpcrl.sections.schema import ActorConfig

    hints = typing.get_type_hints(ActorConfig)
    assert typing.get_args(hints["encoder"]) == ENCODERS
    assert typing.get_args(hints["encoder_init"]) == ENCODER_INITS
    fmt = obs_format(FRAMES)
    for name, cls in IMAGE_ENCODERS.items():
        for init in ENCODER_INITS:
            if init in cls.inits:
                assert type(make_encoder(name, fmt, 32, init=init)) is cls
            else:
                with pytest.raises(ConfigError, match=f"encoder_init' \\({init}\\)"):
                    make_encoder(name, fmt, 32, init=init)
