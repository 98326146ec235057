"""ViZDoom through env.preset=vizdoom (Sample Factory's chain), and the IMPALA ResNet's Fixup
initialisation the showcase agent uses."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.config.loader import load_config
from hpcrl.envs.make import make_env
from hpcrl.envs.vector import make_vector_env
from hpcrl.errors import ConfigError
from hpcrl.models.encoders import FixupResidual

pytest.importorskip("vizdoom")

DOOM = ["env.id=VizdoomHealthGathering-v1", "env.preset=vizdoom"]
SHOWCASE_ACTOR = ["actor.encoder=impala_resnet", "actor.encoder_init=fixup",
                  "actor.features=64", "actor.memory=gru", "actor.memory_size=32",
                  "actor.hidden_sizes=[]", "actor.shared_trunk=true"]


def test_the_chain_renders_small_skips_frames_and_keeps_game_variables_beside_the_screen():
    cfg = from_dict({}, DOOM + ["env.vizdoom.frame_stack=3"])
    env = make_env(cfg.env)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"screen", "gamevariables"}
    assert obs["screen"].shape == (72, 128, 9) and obs["screen"].dtype == np.uint8
    # a fresh episode stacks its first screen three times
    np.testing.assert_array_equal(obs["screen"][..., :3], obs["screen"][..., 6:])
    assert 0 < obs["gamevariables"][0] <= 100  # health (the acid floor has bitten already)
    assert env.unwrapped.frame_skip == 4
    before = obs["screen"]
    obs, *_ = env.step(0)
    np.testing.assert_array_equal(obs["screen"][..., :6], before[..., 3:])  # shifted by one
    env.close()


def test_a_scenario_dict_keeps_its_image_uint8_in_rollouts():
    """The screen travels as one byte a pixel (the Dict as packed bytes), the variables as
    float32 inside the same row."""
    cfg = from_dict({}, DOOM + SHOWCASE_ACTOR + ["env.num_envs=2", "algo.num_steps=4",
                                                 "algo.ppo.minibatch_size=8"])
    spaces = env_spaces(cfg)
    assert spaces.obs_format.dtype == "uint8"
    layout = rollout_layout(cfg, spaces, 2)
    actor = make_actor(cfg, spaces)
    envs = make_vector_env(cfg.env, 2)
    collector = rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed)
    rollout = collector.collect(layout.new())
    assert rollout.obs.dtype == np.uint8
    keys = spaces.obs_format.unpack_numpy(rollout.obs.reshape((-1,) + spaces.obs_shape))
    assert keys["screen"].dtype == np.uint8 and keys["screen"].shape[1:] == (72, 128, 3)
    assert keys["gamevariables"].dtype == np.float32
    assert (keys["gamevariables"] > 0).all()  # health, read back from the bytes
    envs.close()


def test_fixup_blocks_start_as_the_identity_and_survive_the_orthogonal_init():
    cfg = from_dict({}, DOOM + SHOWCASE_ACTOR)
    actor = make_actor(cfg, env_spaces(cfg))
    blocks = [m for m in actor.modules() if isinstance(m, FixupResidual)]
    assert len(blocks) == 6
    x = torch.randn(2, 16, 9, 16)
    torch.testing.assert_close(blocks[0](x), x)
    for block in blocks:
        assert not block.conv1.weight.any() and block.conv0.bias is None
        std = block.conv0.weight.std().item()
        fan_in = block.conv0.in_channels * 9
        assert std == pytest.approx((2 / fan_in) ** 0.5 / 6 ** 0.5, rel=0.15)
    # one gradient step moves the zero convolutions: they learn
    out = actor.pi_encoder(torch.zeros((2,) + actor.obs_shape, dtype=torch.uint8) + 7)
    out.sum().backward()
    assert blocks[-1].conv1.weight.grad.abs().sum() > 0


def test_vizdoom_keys_are_refused_where_they_cannot_apply():
    with pytest.raises(ConfigError, match="not one"):
        env_spaces(from_dict({}, ["env.preset=vizdoom"]))  # CartPole
    with pytest.raises(ConfigError, match="env.preset=vizdoom"):
        env_spaces(from_dict({}, ["env.vizdoom.frame_skip=2", "env.id=VizdoomBasic-v1"]))
    with pytest.raises(ConfigError, match="resolution"):
        env_spaces(from_dict({}, DOOM + ["env.vizdoom.resolution=100x100"]))
    with pytest.raises(ConfigError, match="env.kwargs.frame_skip"):
        env_spaces(from_dict({}, DOOM + ["env.kwargs.frame_skip=3"]))
    with pytest.raises(ConfigError, match="encoder_init"):
        from_dict({}, DOOM + ["actor.encoder=nature_cnn", "actor.encoder_init=fixup"])
    with pytest.raises(ConfigError, match="is your own"):
        from_dict({}, DOOM + ["actor.encoder=impala_resnet", "actor.encoder_init=fixup",
                              "actor.network=mymodule:Net"])


def test_a_q_network_takes_fixup_too():
    """DQN's Q-network builds the same encoder: its residual blocks start as the identity
    (its orthogonal initialisation leaves them alone)."""
    from hpcrl.algorithms import make_policy

    cfg = from_dict({}, ["env.id=MinAtar/Breakout-v1", "algo.name=dqn",
                         "actor.encoder=impala_resnet", "actor.encoder_init=fixup",
                         "actor.features=32", "actor.hidden_sizes=[]"])
    q = make_policy(cfg, env_spaces(cfg))
    blocks = [m for m in q.modules() if isinstance(m, FixupResidual)]
    assert len(blocks) == 6 and all(not b.conv1.weight.any() for b in blocks)


def test_the_showcase_recipe_is_the_seeds_agent_at_the_seeds_layout():
    from hpcrl.scheme.topology import required_world_size

    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "showcase-vizdoom.yaml")
    assert required_world_size(cfg.scheme) == 10
    assert (cfg.actor.encoder, cfg.actor.encoder_init, cfg.actor.memory,
            cfg.actor.memory_size) == ("impala_resnet", "fixup", "gru", 256)
    assert (cfg.scheme.gradient_workers, cfg.scheme.collectors_per_worker,
            cfg.scheme.collection, cfg.scheme.gradients) == (2, 4, "async", "sync")
    assert (cfg.env.vizdoom.frame_skip, cfg.env.vizdoom.frame_stack) == (2, 4)


def _start_a_game(barrier, preset: bool, out) -> None:
    """One process of the test below: build a game in the shared working directory, wait
    for the others, start its engine (the first reset) and report where it ran."""
    import os

    from hpcrl.envs import vizdoom_preset as vizdoom

    cfg = from_dict({}, DOOM if preset else ["env.id=VizdoomBasic-v1"])
    env = make_env(cfg.env)
    barrier.wait()
    env.reset(seed=0)
    env.step(0)
    out.put((os.getcwd(), str(vizdoom.engine_dir())))
    env.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("preset", [True, False], ids=["preset", "raw-id"])
def test_games_started_together_in_one_directory_each_run_their_engine_apart(
        tmp_path, monkeypatch, preset):
    # ViZDoom's engine makes ./_vizdoom/ where it starts, and a second engine starting there
    # at the same moment fails (a rank of the showcase was lost to it): hpcrl starts each
    # process's engines in a directory of that process's, and leaves the user's alone
    import multiprocessing

    monkeypatch.chdir(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_start_a_game, args=(barrier, preset, out)) for _ in range(4)]
    for proc in procs:
        proc.start()
    reports = [out.get(timeout=100) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert [proc.exitcode for proc in procs] == [0] * 4
    assert {cwd for cwd, _ in reports} == {str(tmp_path)}  # the working directory restored
    assert len({engine for _, engine in reports}) == 4  # one engine directory a process
    assert list(tmp_path.iterdir()) == []  # no _vizdoom/ nor _vizdoom.ini left here
    assert not any(Path(engine).exists() for _, engine in reports)  # removed at exit


def test_a_forked_child_does_not_share_its_parents_engine_directory():
    import multiprocessing

    from hpcrl.envs.vizdoom_preset import engine_dir

    mine = engine_dir()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=lambda: out.put(str(engine_dir())))
    child.start()
    theirs = out.get(timeout=30)
    child.join(30)
    assert theirs != str(mine) and mine.is_dir()
