"""The AEC adapter on PettingZoo's connect four (turn-based, masks in the observation) and on
a Parallel game converted to AEC (agents that leave): turns, masks, rewards that arrive on
another seat's turn, final steps, and outcomes."""
from __future__ import annotations

import time

import numpy as np
import pytest
from ma_envs import Relay, random_legal
from pettingzoo.classic import connect_four_v3
from pettingzoo.utils.conversions import parallel_to_aec

from hpcrl.envs.multiagent.aec import AECSeats, is_aec
from hpcrl.envs.multiagent.named_envs import adapt
from hpcrl.envs.multiagent.seat_vector import SeatVector

P0, P1 = "player_0", "player_1"


def _connect_four(seed: int = 0, env_index: int = 0) -> AECSeats:
    seats = adapt(connect_four_v3.env(), seed, env_index)
    assert isinstance(seats, AECSeats)
    return seats


def test_connect_four_is_adapted_as_turn_based_with_its_mask_split_off():
    env = _connect_four()
    assert is_aec(connect_four_v3.env())
    assert env.seats == (P0, P1)
    step = env.reset()
    assert step.acting == (P0,)
    assert step.obs[P0].shape == (6, 7, 2)  # the board only: the mask is split off
    assert step.masks[P0].dtype == bool and step.masks[P0].all()
    assert step.results == {} and step.ended is None


def test_turns_alternate_and_a_full_column_is_masked_and_refused():
    env = _connect_four()
    step = env.reset()
    for turn in range(6):  # both players fill column 0, alternating: nobody wins
        assert step.acting == ((P0,) if turn % 2 == 0 else (P1,))
        step = env.step({step.acting[0]: 0})
    assert step.acting == (P0,)
    assert not step.masks[P0][0] and step.masks[P0][1:].all()
    with pytest.raises(ValueError, match="'player_0' was given the illegal move 0"):
        env.step({P0: 0})
    with pytest.raises(ValueError, match="'player_0' acts now but was given no action"):
        env.step({P1: 1})


def test_the_losers_reward_reaches_its_last_move_and_the_next_match_starts():
    env = _connect_four(seed=3, env_index=2)
    env.reset()
    for _ in range(3):  # player_0 stacks column 0, player_1 column 1
        step = env.step({P0: 0})
        assert step.acting == (P1,) and set(step.results) <= {P1}  # only the mover's turn
        step = env.step({P1: 1})
        assert step.results == {P0: step.results[P0]} and step.results[P0].reward == 0.0
    step = env.step({P0: 0})  # four in column 0: player_0 wins on its own turn
    assert step.results[P1].reward == -1.0 and step.results[P1].terminated
    assert step.results[P0].reward == 1.0 and step.results[P0].terminated
    assert step.results[P1].final_obs.shape == (6, 7, 2)
    end = step.ended
    assert end is not None and (end.env_index, end.episode, end.seed) == (2, 0, 5)
    assert end.returns == {P0: 1.0, P1: -1.0} and end.length == 7
    assert step.acting == (P0,) and env.episode == 1  # the next match, reset at once
    assert not step.obs[P0].any()  # its empty board


def test_random_legal_play_of_100_games_is_fast_and_consistent():
    envs = SeatVector([_connect_four(7, i) for i in range(8)])
    rng = np.random.default_rng(0)
    step = envs.reset()
    collected = np.zeros((8, 2))  # each seat's rewards as its steps report them
    finished = []
    started = time.perf_counter()
    while len(finished) < 100:
        assert (step.acting.sum(axis=1) == 1).all()  # one seat moves in each game: its turn's
        turns = [envs.seats.index(env.env.agent_selection) for env in envs.envs]
        assert step.acting[np.arange(8), turns].all()
        actions = random_legal(step.masks, envs.seats, rng)
        for k, seat in enumerate(envs.seats):  # a random-legal move is legal
            acting = step.acting[:, k]
            assert step.masks[seat][acting, actions[seat][acting]].all()
        step = envs.step(actions)
        collected += np.where(step.stepped, step.rewards, 0.0)
        for match in step.matches:
            n = match.env_index
            assert step.dones[n].all() and step.stepped[n].all()  # each seat's final step
            assert collected[n].tolist() == [match.returns[P0], match.returns[P1]]
            assert sorted(match.outcomes.values()) in (["loss", "win"], ["draw", "draw"])
            collected[n] = 0.0
        finished += step.matches
    assert time.perf_counter() - started < 5.0  # about half a second on an idle core
    tally = envs.tracker.tally
    assert tally[P0]["win"] == tally[P1]["loss"] and tally[P0]["draw"] == tally[P1]["draw"]
    assert envs.tracker.matches == len(finished)


def test_a_seat_that_leaves_early_gets_its_final_step_once_and_acts_no_more():
    env = adapt(parallel_to_aec(Relay(join=False)), 0)
    assert isinstance(env, AECSeats)
    step = env.reset()
    acted = {seat: 0 for seat in env.seats}
    finals: dict[str, list[float]] = {seat: [] for seat in env.seats}
    while step.ended is None:
        assert len(step.acting) == 1 and "late" not in step.acting
        acted[step.acting[0]] += 1
        step = env.step({step.acting[0]: 0})
        for seat, result in step.results.items():
            if result.terminated or result.truncated:
                finals[seat].append(result.reward)
    assert acted == {"a": 2, "b": 3, "c": 4, "late": 0}
    assert finals == {"a": [1.0], "b": [11.0], "c": [21.0], "late": []}
    assert step.ended.returns == {"a": 2.0, "b": 13.0, "c": 24.0}
    assert step.ended.terminated == {"a": True, "b": True, "c": False}
