"""Atari through ale-py with ``env.preset: atari``: the chain is Gymnasium's preprocessing
frame for frame, both id families work as ``env.id``, lost lives end training episodes while
the statistics count whole, unclipped games, and ``hpcrl train`` runs, evaluates and resumes.
"""
from __future__ import annotations

import builtins
import json

import gymnasium as gym
import numpy as np
import pytest
from click.testing import CliRunner

from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.cli import main
from hpcrl.collection.collector import rollout_collector
from hpcrl.config import from_dict
from hpcrl.config.loader import ConfigError
from hpcrl.envs.make import make_env
from hpcrl.envs.vector import make_vector_env, probe_spaces

pytest.importorskip("ale_py", reason='needs pip install "hpcrl[atari]"')

ATARI = ["env.preset=atari"]


def env_config(env_id: str, *sets: str):
    return from_dict({}, [f"env.id={env_id}", *ATARI, *sets]).env


def reference_chain(env_id: str) -> gym.Env:
    """Gymnasium's own Atari preprocessing with its defaults, stacked by 4."""
    env = gym.make(env_id, frameskip=1)
    env = gym.wrappers.AtariPreprocessing(env)  # noop 30, skip 4, 84x84 grayscale
    return gym.wrappers.FrameStackObservation(env, 4)


@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "PongNoFrameskip-v4"])
def test_chain_gives_the_frames_of_gymnasiums_preprocessing(env_id):
    ours = make_env(env_config(env_id, "env.atari.fire_reset=false"))
    ref = reference_chain(env_id)
    try:
        obs, _ = ours.reset(seed=3)
        want, _ = ref.reset(seed=3)
        np.testing.assert_array_equal(obs, want)
        actions = np.random.default_rng(0).integers(0, ours.action_space.n, 300)
        for t, action in enumerate(actions):
            obs, reward, term, trunc, _ = ours.step(action)
            want, ref_reward, ref_term, ref_trunc, _ = ref.step(action)
            np.testing.assert_array_equal(obs, want, err_msg=f"step {t}")
            assert (reward, term, trunc) == (ref_reward, ref_term, ref_trunc)
    finally:
        ours.close()
        ref.close()


def sticky_actions(env: gym.Env) -> float:
    return env.unwrapped.ale.getFloat("repeat_action_probability")


@pytest.mark.parametrize("env_id,sticky", [("ALE/Pong-v5", 0.25), ("PongNoFrameskip-v4", 0.0)])
def test_both_id_families_make_the_expected_spaces(env_id, sticky):
    cfg = env_config(env_id)
    spaces = probe_spaces(cfg)
    assert spaces.obs_shape == (4, 84, 84)
    assert spaces.action_space == gym.spaces.Discrete(6)
    env = make_env(cfg)
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
        ale_env = env.unwrapped
        assert ale_env._frameskip == 1  # the chain skips frames, once
        assert sticky_actions(env) == sticky  # the id's own sticky actions
    finally:
        env.close()
    no_sticky = make_env(env_config(env_id, "env.atari.repeat_action_probability=0"))
    assert sticky_actions(no_sticky) == 0.0
    no_sticky.close()


def play_one_game(env: gym.Env, seed: int) -> dict:
    """Random actions (seeded) until the game is over; what each step said."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards, life_ends, episode = [], 0, None
    while episode is None:
        _, reward, term, trunc, info = env.step(rng.integers(0, env.action_space.n))
        rewards.append(float(reward))
        if info.get("life_lost"):
            assert term, "a lost life ends the training episode"
            life_ends += 1
            env.reset()
        elif term or trunc:
            episode = info.get("episode", {})
    env.close()
    return {"rewards": rewards, "life_ends": life_ends, "episode": episode}


def test_lost_lives_end_training_episodes_and_statistics_keep_unclipped_games():
    """SpaceInvaders scores 5 to 30 points an alien and has 3 lives."""
    clipped = play_one_game(make_env(env_config("ALE/SpaceInvaders-v5")), seed=1)
    raw = play_one_game(make_env(env_config("ALE/SpaceInvaders-v5",
                                            "env.atari.clip_reward=false")), seed=1)
    assert clipped["life_ends"] == raw["life_ends"] == 2  # lives 3 -> 2 -> 1, then game over
    assert max(clipped["rewards"]) == 1.0 and max(raw["rewards"]) > 1.0
    game_score = sum(raw["rewards"])
    assert clipped["episode"]["r"] == game_score > sum(clipped["rewards"])
    assert clipped["episode"]["l"] >= len(clipped["rewards"])  # the whole game's steps


def test_evaluation_env_plays_whole_games_with_the_games_rewards():
    env = make_env(env_config("ALE/SpaceInvaders-v5"), whole_games=True)
    env.reset(seed=1)
    rng = np.random.default_rng(1)
    rewards, done = [], False
    while not done:
        _, reward, term, trunc, info = env.step(rng.integers(0, env.action_space.n))
        rewards.append(reward)
        done = term or trunc
    assert term and info["lives"] == 0  # the episode is the game: all lives spent
    assert max(rewards) > 1.0
    env.close()


def test_collector_reports_whole_games_not_lives():
    """Breakout has 5 lives: each game the rollout reports ended 5 training episodes."""
    cfg = from_dict({}, ["env.id=ALE/Breakout-v5", *ATARI, "env.num_envs=2",
                         "algo.num_steps=600", "algo.ppo.minibatch_size=600"])
    spaces = env_spaces(cfg)
    envs = make_vector_env(cfg.env, 2)
    collector = rollout_collector(envs, make_actor(cfg, spaces), cfg.env, cfg.algo.gamma, cfg.seed)
    rollout = collector.collect(rollout_layout(cfg, spaces, 2).new())
    envs.close()
    returns, lengths = rollout.finished_episodes()
    assert len(returns) >= 1, "random Breakout games last about 200 steps"
    for env in range(2):
        games = (rollout.episode_lengths[:, env] > 0).sum()
        assert rollout.terminated[:, env].sum() >= 5 * games
    assert (lengths > 100).all(), "whole games, not single lives"
    assert (returns >= 0).all() and (returns == np.round(returns)).all()


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sets(items: list[str]) -> list[str]:
    return [x for item in items for x in ("--set", item)]


@pytest.mark.timeout(600)
def test_pong_trains_evaluates_and_resumes_from_the_cli(tmp_path):
    """Pong games are cut to 1,000 frames (250 steps) by ALE's own option so that games end
    and evaluation stays short."""
    run = tmp_path / "run"
    quick = ["env.id=ALE/Pong-v5", "env.preset=atari", "env.num_envs=2", "algo.num_steps=128",
             "algo.ppo.minibatch_size=128", "algo.ppo.num_epochs=1", "train.eval_episodes=1",
             "train.tensorboard=false", "env.kwargs={max_num_frames_per_episode: 1000}"]
    out = invoke("train", "--run-dir", run, *sets(quick + ["train.total_env_steps=768"]))
    assert out.exit_code == 0, out.output
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["episodes"] == 1 and -21 <= evaluation["mean_return"] <= 21
    evaluated = invoke("eval", run, "--episodes", "1", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert -21 <= json.loads(evaluated.output.strip().splitlines()[-1])["mean_return"] <= 21

    resumed = invoke("train", "--resume", run, "--set", "train.total_env_steps=1280")
    assert resumed.exit_code == 0, resumed.output
    assert "envs were reset" in resumed.output  # the emulator cannot be saved: its envs start again
    header, *rows = (run / "progress.csv").read_text().strip().splitlines()
    columns = header.split(",")
    last = dict(zip(columns, rows[-1].split(","), strict=False))
    assert int(last["env_steps"]) == 1280
    scores = [float(dict(zip(columns, r.split(","), strict=False))["episode_return_mean"])
              for r in rows]
    scores = [s for s in scores if not np.isnan(s)]
    assert scores and all(-21 <= s <= 21 for s in scores)  # Pong game scores

    import hpcrl
    policy = hpcrl.load_policy(run)  # takes the chain's raw uint8 frame stacks
    frames = np.zeros((4, 84, 84), np.uint8)
    assert policy(frames).dim() == 0 and policy(np.stack([frames] * 3)).shape == (3,)


def test_missing_ale_py_is_one_line_naming_the_install(monkeypatch):
    for env_id in [k for k in gym.registry if k.startswith("ALE/") or "NoFrameskip" in k]:
        monkeypatch.delitem(gym.registry, env_id)
    real_import = builtins.__import__

    def no_ale(name, *args, **kwargs):
        if name.split(".")[0] == "ale_py":
            raise ImportError("No module named 'ale_py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ale)
    for env_id in ("ALE/Pong-v5", "PongNoFrameskip-v4"):
        with pytest.raises(ConfigError) as err:
            from_dict({}, [f"env.id={env_id}", "env.preset=atari"])
        message = str(err.value)
        assert "\n" not in message and 'pip install "hpcrl[atari]"' in message
        assert env_id in message


@pytest.mark.parametrize("sets_,key", [
    (["env.id=CartPole-v1", "env.preset=atari"], "env.preset"),
    (["env.id=ALE/Pong-v5", "env.preset=atari", "env.atari.frame_skip=0"],
     "env.atari.frame_skip"),
    (["env.id=ALE/Pong-v5", "env.preset=atari", "env.kwargs={frameskip: 4}"],
     "env.kwargs.frameskip"),
    (["env.id=ALE/Pong-v5", "env.atari.repeat_action_probability=1.5"],
     "env.atari.repeat_action_probability"),
])
def test_impossible_atari_settings_are_refused_naming_the_key(sets_, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        from_dict({}, sets_)


def test_a_whole_game_goes_on_after_a_lost_life_without_the_policy_pressing_fire():
    """Evaluation plays whole games: after a lost life Breakout waits for FIRE, which the
    chain presses, so a policy that never fires still finishes its game (not only at ALE's
    108,000-frame limit)."""
    from hpcrl.config.loader import from_dict
    from hpcrl.envs.make import make_env

    cfg = from_dict({}, ["env.id=ALE/Breakout-v5", "env.preset=atari"])
    env = make_env(cfg.env, whole_games=True)
    env.reset(seed=0)
    for steps in range(1, 3001):  # noqa: B007  (the count is read after the loop)
        _, _, terminated, truncated, _ = env.step(0)  # NOOP, never FIRE
        if terminated or truncated:
            break
    env.close()
    assert terminated and steps < 3000


def test_atari_keys_without_the_preset_are_refused_not_ignored():
    from hpcrl.config.loader import ConfigError, from_dict

    with pytest.raises(ConfigError, match="env.preset=atari"):
        from_dict({}, ["env.id=ALE/Pong-v5", "env.atari.frame_stack=2"])
