"""A Parallel game whose agents share one policy (``env.agents=shared``): the joint env, its
agents as env slots, and their states."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from hpcrl.config.loader import from_dict
from hpcrl.envs.make import make_env
from hpcrl.envs.multiagent.agent_slots import slot_games
from hpcrl.envs.multiagent.joint_agents import AGENT_REWARDS, JointAgentsEnv
from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, make_pettingzoo
from hpcrl.envs.multiagent.play_modes import agents_mode
from hpcrl.envs.vector import make_vector_env, probe_spaces, reset_seeded
from hpcrl.errors import ConfigError

pytest.importorskip("mpe2")
SPREAD = "mpe2.simple_spread_v3"


def _env_config(**env):
    return from_dict({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6, **env},
                      "actor": {"action_mask": True},
                      "algo": {"ppo": {"minibatch_size": 48}}}).env


def test_auto_shares_a_parallel_game_and_leaves_a_turn_based_one_to_the_league():
    assert agents_mode(_env_config()) == "shared"
    board = from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"},
                       "actor": {"action_mask": True}}).env
    assert agents_mode(board) == "league"
    with pytest.raises(MultiAgentEnvError, match="turn-based"):
        JointAgentsEnv("pettingzoo.classic.tictactoe_v3")


def test_the_joint_env_steps_every_agent_as_the_game_does():
    joint = JointAgentsEnv(SPREAD)
    game = make_pettingzoo(SPREAD)
    obs, info = joint.reset(seed=3)
    raw, _ = game.reset(seed=3)
    assert obs.shape == (3, 18 + 5) and joint.agent_rows == 3
    assert np.array_equal(obs[:, :18], np.stack([raw[a] for a in game.possible_agents]))
    assert np.all(obs[:, 18:] == 1.0)  # MPE gives no legal moves: all legal
    rng = np.random.default_rng(0)
    for _ in range(25):
        moves = rng.integers(0, 5, size=3)
        obs, reward, terminated, truncated, info = joint.step(moves)
        raw, rewards, _, truncations, _ = game.step(
            {a: int(m) for a, m in zip(game.possible_agents, moves, strict=True)})
        agent_rewards = np.array([rewards[a] for a in game.possible_agents], np.float32)
        assert np.array_equal(info[AGENT_REWARDS], agent_rewards)
        assert reward == pytest.approx(agent_rewards.mean())
    assert truncated and not terminated and all(truncations.values())  # 25 cycles


def test_a_state_replays_the_match_under_way():
    joint, again = JointAgentsEnv(SPREAD), JointAgentsEnv(SPREAD)
    joint.reset(seed=5)
    joint.reset()  # the sequence's second match
    for m in range(7):
        joint.step(np.full(3, m % 5))
    again.set_state(joint.get_state())
    moves = np.array([1, 2, 3])
    assert np.array_equal(joint.step(moves)[0], again.step(moves)[0])


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_every_agent_of_every_game_is_an_env_slot(vectorization: str):
    config = _env_config(vectorization=vectorization)  # games in the process or subprocesses
    spaces = probe_spaces(config)
    assert spaces.obs_shape == (23,) and spaces.action_space == gym.spaces.Discrete(5)
    envs = make_vector_env(config, 6, range(6, 12))  # games 2 and 3 of the job
    games = [make_env(config) for _ in range(2)]
    obs, _ = reset_seeded(envs, [100 + i for i in range(6, 12)])
    firsts = [g.reset(seed=100 + 6 + 3 * k)[0] for k, g in enumerate(games)]
    assert envs.num_envs == 6 and np.array_equal(obs, np.concatenate(firsts))
    returns = np.zeros(6)
    for _ in range(25):
        actions = np.arange(6) % 5
        obs, rewards, terminated, truncated, info = envs.step(actions)
        returns += rewards
        for k, game in enumerate(games):
            step = game.step(actions[3 * k:3 * k + 3])
            assert np.array_equal(rewards[3 * k:3 * k + 3], step[4][AGENT_REWARDS])
    assert truncated.all() and info["_final_obs"].all()  # each agent's final observation
    assert info["final_obs"][4].shape == (23,) and returns.std() > 0  # own returns
    states = envs.call("hpcrl_state")
    assert len(states) == 6 and states[0] == states[2] != states[3]
    envs.close()


def test_slots_hold_whole_games():
    assert slot_games(range(6, 12), 3) == [2, 3]
    with pytest.raises(ConfigError, match="multiple of 3"):
        slot_games(range(4, 10), 3)


def test_agents_that_join_late_or_leave_early_have_rows_of_zeros():
    """Relay (ma_envs): a leaves after step 2, b after 3, late joins after 1; c and late are
    truncated at 4, which ends the game. Outside the game an agent's row is zeros (all moves
    legal) and its reward 0; the game's last rows keep the last agents' observations."""
    joint = JointAgentsEnv("ma_envs:relay")
    assert joint.agents == ("a", "b", "c", "late")
    obs, _ = joint.reset(seed=1)
    assert np.array_equal(obs[3], [0, 0, 1, 1, 1])  # late, not in the game yet
    ends = []
    for t in range(1, 5):
        obs, _, terminated, truncated, info = joint.step(np.ones(4, np.int64))
        ends.append((terminated, truncated))
        rewards = info[AGENT_REWARDS]
        if t == 1:
            assert obs[3, 0] == 1 and rewards[3] == 0  # late joined: seen, not yet rewarded
        if t == 2:
            assert np.array_equal(obs[0], [0, 0, 1, 1, 1]) and rewards[0] == 2.0  # a left
        if t == 3:
            assert obs[1, :2].tolist() == [0, 0] and rewards[1] == 12.0 and rewards[0] == 0
    assert ends == [(False, False)] * 3 + [(False, True)]  # the game ends when no one is left
    assert rewards.tolist() == [0.0, 0.0, 22.0, 32.0] and obs[2, 0] == obs[3, 0] == 4


def test_a_game_that_breaks_is_made_again_and_counted_once():
    """An env restart (hpcrl.envs.restarts) reaches the slots: every agent's episode is cut,
    and the game made again is marked on its first slot only (one restart, not four)."""
    import ma_envs

    config = from_dict({"env": {"id": "ma_envs:breaking_relay", "multiagent": True,
                                "num_envs": 4, "max_restarts": 2},
                        "actor": {"action_mask": True},
                        "algo": {"ppo": {"minibatch_size": 32}}}).env
    envs = make_vector_env(config, 4, range(4))
    reset_seeded(envs, [0, 1, 2, 3])
    ma_envs._Breaks.armed = True
    envs.step(np.ones(4, np.int64))
    _, _, _, truncated, info = envs.step(np.ones(4, np.int64))  # the game breaks here
    assert truncated.all() and info["final_info"]["_hpcrl_cut"].all()
    assert info["_hpcrl_restart"].tolist() == [True, False, False, False]
    envs.close()
