"""The vector of multi-agent envs: per-seat arrays [N, ...], acting masks, steps, final
observations, matches, and refusals."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from ma_envs import Relay
from pettingzoo.classic import connect_four_v3

from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, adapt
from hpcrl.envs.multiagent.seat_vector import SeatVector, make_seat_vector, obs_layout
from hpcrl.envs.multiagent.seats import SeatSpace


def test_connect_four_arrays_have_the_documented_shapes():
    envs = make_seat_vector("pettingzoo.classic.connect_four_v3", 3, seed=0)
    step = envs.reset()
    assert envs.num_envs == 3 and envs.seats == ("player_0", "player_1")
    assert step.acting.shape == (3, 2) and step.acting.dtype == bool
    assert step.acting.tolist() == [[True, False]] * 3
    for seat in envs.seats:
        assert step.obs[seat].shape == (3, 6, 7, 2) and step.obs[seat].dtype == np.int8
        assert step.masks[seat].shape == (3, 7) and step.masks[seat].dtype == bool
        assert step.final_obs[seat].shape == (3, 6, 7, 2)
    assert not step.masks["player_1"].any()  # a seat that does not act has no legal move
    for flags in (step.stepped, step.terminated, step.truncated, step.dones):
        assert flags.shape == (3, 2) and not flags.any()
    assert step.rewards.shape == (3, 2) and step.rewards.dtype == np.float32


def test_acting_masks_follow_each_envs_turn_and_other_seats_actions_are_ignored():
    envs = make_seat_vector("pettingzoo.classic.connect_four_v3", 2, seed=0)
    envs.reset()
    step = envs.step({"player_0": np.array([3, 4]), "player_1": np.array([99, 99])})
    assert step.acting.tolist() == [[False, True]] * 2
    assert step.obs["player_1"][0].sum() == 1 and step.obs["player_1"][1].sum() == 1
    assert not step.obs["player_0"].any()  # zeros where the seat does not act
    step = envs.step({"player_1": np.array([3, 3])})  # a seat that acts nowhere: no entry
    assert step.acting.tolist() == [[True, False]] * 2
    assert step.stepped.tolist() == [[True, False]] * 2  # player_0's move is complete
    with pytest.raises(ValueError, match="'player_0' acts now but was given no action"):
        envs.step({"player_1": np.array([0, 0])})


def test_leaving_and_joining_seats_show_in_the_arrays():
    envs = SeatVector([adapt(Relay(), 0, i) for i in range(2)])
    step = envs.reset()
    zeros = {seat: np.zeros(2, dtype=np.int64) for seat in envs.seats}
    assert step.acting.tolist() == [[True, True, True, False]] * 2
    step = envs.step(zeros)
    assert step.acting.tolist() == [[True, True, True, True]] * 2
    step = envs.step(zeros)
    assert step.acting.tolist() == [[False, True, True, True]] * 2
    assert step.terminated.tolist() == [[True, False, False, False]] * 2
    assert step.stepped.tolist() == [[True, True, True, True]] * 2
    assert step.final_obs["a"][:, 0].tolist() == [2.0, 2.0]  # its step count when it left
    assert envs.returns().tolist() == [[2.0, 2.0, 2.0, 1.0]] * 2
    envs.step(zeros)
    step = envs.step(zeros)
    assert [m.returns for m in step.matches] == [{"a": 2.0, "b": 13.0, "c": 24.0,
                                                  "late": 33.0}] * 2
    assert [m.outcomes for m in step.matches] == [None, None]  # truncated, not zero-sum
    assert step.truncated.tolist() == [[False, False, True, True]] * 2
    assert envs.returns().tolist() == [[0.0] * 4] * 2  # the next match has just begun


def test_envs_of_other_seats_and_dict_observations_are_refused():
    with pytest.raises(ValueError, match="the same seats"):
        SeatVector([adapt(Relay(), 0), adapt(connect_four_v3.env(), 0)])
    with pytest.raises(ValueError, match="at least one env"):
        SeatVector([])
    space = SeatSpace(gym.spaces.Dict({"x": gym.spaces.Discrete(2)}), gym.spaces.Discrete(2),
                      False)
    with pytest.raises(MultiAgentEnvError, match="seat 'p' observes Dict"):
        obs_layout("p", space)
    assert obs_layout("p", SeatSpace(gym.spaces.Discrete(4), gym.spaces.Discrete(2), False)) == (
        (), np.dtype(np.int64))
