"""EnvPool as the collectors' vector env: chosen by default for Atari, refused with the
reason where it cannot serve, the same frames as the Gymnasium chain where the two
emulations agree, same-step autoreset with whole-game statistics, and training through the
CLI."""
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.config import ConfigError, load_config
from hpcrl.envs.backends.envpool import uses_envpool
from hpcrl.envs.vector import make_vector_env

pytest.importorskip("envpool")

ATARI_PPO = Path(__file__).parents[2] / "examples" / "atari-ppo.yaml"
PONG = ["env.id=ALE/Pong-v5", "env.preset=atari"]
# the settings under which the two emulations draw nothing at random
DETERMINISTIC = ["env.atari.noop_max=1", "env.atari.repeat_action_probability=0",
                 "env.atari.fire_reset=false", "env.atari.clip_reward=false",
                 "env.atari.terminal_on_life_loss=false"]


def envs_of(sets, n=1):
    return make_vector_env(load_config(None, sets).env, n)


def play(envs, steps, actions, seed=7):
    obs, _ = envs.reset(seed=[seed + i for i in range(envs.num_envs)])
    frames, infos = [obs.copy()], []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, rewards, terminated, truncated, info = envs.step(
            rng.integers(0, actions, envs.num_envs))
        frames.append(obs.copy())
        infos.append((rewards, terminated, truncated, info))
    envs.close()
    return np.stack(frames), infos


def test_auto_takes_envpool_for_atari_and_gymnasium_elsewhere():
    assert type(envs_of(PONG)).__name__ == "EnvPoolVectorEnv"
    assert type(envs_of(PONG + ["env.backend=gymnasium"])).__name__ == "SyncVectorEnv"
    assert type(envs_of([])).__name__ == "SyncVectorEnv"  # CartPole stays checkpointable
    assert type(envs_of(["env.backend=envpool"])).__name__ == "EnvPoolVectorEnv"
    # auto keeps Gymnasium where EnvPool cannot serve the chain, or subprocesses were asked for
    assert type(envs_of(PONG + ["env.atari.noop_max=0"])).__name__ == "SyncVectorEnv"
    assert type(envs_of(PONG + ["env.vectorization=async"])).__name__ == "AsyncVectorEnv"


@pytest.mark.parametrize("sets, message", [
    (["env.backend=envpool", "env.id=MinAtar/Breakout-v1"], "EnvPool does not ship"),
    (["env.backend=envpool", "env.id=ALE/Pong-v5"], "serve env.preset=atari only"),
    (["env.backend=envpool", *PONG, "env.atari.grayscale=false"], "stacks RGB frames"),
    (["env.backend=envpool", *PONG, "env.atari.noop_max=0"], "set env.atari.noop_max >= 1"),
    (["env.backend=envpool", "env.wrappers=[gymnasium.wrappers:ClipReward]"],
     "drop env.wrappers or use env.backend=gymnasium"),
    (["env.backend=envpool", "env.kwargs={sutton_barto_reward: true}"], "drop env.kwargs"),
    (["env.backend=envpool", *PONG, "env.vectorization=async"],
     "drop env.vectorization=async"),
    (["env.envpool_threads=-1"], "'env.envpool_threads' must be >= 0"),
])
def test_what_envpool_cannot_serve_is_refused_with_the_fix(sets, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, sets)
    assert message in str(err.value)
    assert "env.backend" in str(err.value) or "envpool_threads" in str(err.value)


def test_a_refusal_through_the_cli_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path / "run"), "--set",
                                       "env.backend=envpool", "--set",
                                       "env.id=MinAtar/Breakout-v1"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "env.backend=gymnasium" in result.output
    assert not (tmp_path / "run" / "progress.csv").exists()


def test_the_same_frames_as_the_gymnasium_chain_where_the_emulations_agree():
    gym_frames, _ = play(envs_of(PONG + DETERMINISTIC + ["env.backend=gymnasium"]), 300, 6)
    pool_frames, _ = play(envs_of(PONG + DETERMINISTIC + ["env.backend=envpool"]), 300, 6)
    assert gym_frames.shape == pool_frames.shape == (301, 1, 4, 84, 84)
    assert pool_frames.dtype == np.uint8
    np.testing.assert_array_equal(pool_frames, gym_frames)


def test_same_step_autoreset_and_whole_games_with_lives():
    # Breakout: 5 lives; each lost life ends a training episode, not the game
    envs = envs_of(["env.id=ALE/Breakout-v5", "env.preset=atari", "env.atari.clip_reward=false",
                    "env.backend=envpool"], 2)
    frames, infos = play(envs, 1500, 4)
    lives_lost = games = 0
    returns = np.zeros(2)
    for t, (rewards, terminated, truncated, info) in enumerate(infos):
        returns += rewards
        done = terminated | truncated
        if not done.any():
            assert "final_obs" not in info
            continue
        final = info["final_info"]
        assert np.array_equal(final["_episode"] | final["_life_lost"], done)
        for i in np.flatnonzero(final["_episode"]):
            assert final["episode"]["r"][i] == returns[i]  # the whole game's score
            returns[i] = 0.0
            games += 1
        lives_lost += int(final["_life_lost"].sum())
        # the last frame of the episode is in final_obs; obs is the next episode's first
        i = int(np.flatnonzero(done)[0])
        assert not np.array_equal(info["final_obs"][i], frames[t + 1][i])
    assert games >= 1 and lives_lost >= 4 * games


def test_atari_ppo_trains_on_envpool_through_the_cli(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "train", str(ATARI_PPO), "--run-dir", str(run_dir),
        "--set", "train.total_env_steps=1024", "--set", "env.num_envs=4",
        "--set", "algo.num_steps=128", "--set", "algo.ppo.minibatch_size=128",
        "--set", "train.eval_episodes=1", "--set", "train.eval_max_episode_steps=200",
        "--set", "train.tensorboard=false"])
    assert result.exit_code == 0, result.output
    assert uses_envpool(load_config(str(run_dir / "config.yaml"), []).env)  # the default
    assert len(json.loads((run_dir / "eval.json").read_text())["returns"]) == 1
    # the collector's envs really were EnvPool's: they are what a resume cannot restore
    resumed = CliRunner().invoke(main, ["train", "--resume", str(run_dir), "--set",
                                        "train.total_env_steps=1536"])
    assert resumed.exit_code == 0, resumed.output
    assert "envs were reset" in resumed.output and "envpool" in resumed.output
