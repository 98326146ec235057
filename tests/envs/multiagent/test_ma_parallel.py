"""The Parallel adapter on a tiny game whose agents leave, join late and vanish: who acts,
who gets a step, each seat's final step once, and masks from the infos."""
from __future__ import annotations

import numpy as np
from ma_envs import Relay

from hpcrl.envs.multiagent.named_envs import adapt
from hpcrl.envs.multiagent.parallel import ParallelSeats
from hpcrl.envs.multiagent.seats import SeatEnv, SeatStep


def _play(env: SeatEnv, action: int = 0) -> list[SeatStep]:
    """One whole match, every seat playing ``action``: the reset's step and each step's."""
    steps = [env.reset()]
    while steps[-1].ended is None:
        steps.append(env.step({seat: action for seat in steps[-1].acting}))
    return steps


def test_seats_act_while_in_agents_and_a_late_one_joins():
    env = adapt(Relay(), seed=0)
    assert isinstance(env, ParallelSeats) and env.seats == ("a", "b", "c", "late")
    acting = [step.acting for step in _play(env)[:-1]]
    assert acting == [("a", "b", "c"), ("a", "b", "c", "late"), ("b", "c", "late"),
                      ("c", "late")]


def test_each_seat_gets_a_step_per_action_and_its_final_step_once():
    steps = _play(adapt(Relay(), seed=0))
    stepped = [sorted(step.results) for step in steps]
    # the joiner gets no step before its first action; one that left gets none after it
    assert stepped == [[], ["a", "b", "c"], ["a", "b", "c", "late"], ["b", "c", "late"],
                       ["c", "late"]]
    finals = {seat: (result.reward, result.terminated, result.truncated)
              for step in steps for seat, result in step.results.items()
              if result.terminated or result.truncated}
    assert finals == {"a": (1.0, True, False), "b": (11.0, True, False),
                      "c": (21.0, False, True), "late": (31.0, False, True)}
    assert all(result.final_obs.shape == (2,) for step in steps
               for result in step.results.values() if result.terminated or result.truncated)
    end = steps[-1].ended
    assert end.returns == {"a": 2.0, "b": 13.0, "c": 24.0, "late": 33.0} and end.length == 4
    assert end.seats == ("a", "b", "c", "late")


def test_rewards_follow_the_seats_own_actions():
    end = _play(adapt(Relay(), seed=0), action=1)[-1].ended
    assert end.returns == {"a": 4.0, "b": 16.0, "c": 28.0, "late": 36.0}


def test_masks_come_from_the_infos():
    step = adapt(Relay(), seed=0).reset()
    assert step.masks["b"].tolist() == [True, True, False]
    assert step.masks["a"].all()


def test_a_seat_dropped_without_being_done_ends_truncated_with_the_match():
    steps = _play(adapt(Relay(vanish=True), seed=0))
    assert "c" not in steps[3].acting and "c" not in steps[3].results
    last = steps[-1].results["c"]
    assert (last.reward, last.terminated, last.truncated, last.final_obs) == (0.0, False, True,
                                                                              None)
    assert steps[-1].ended.truncated["c"] and steps[-1].ended.returns["c"] == 2.0


def test_the_next_match_starts_in_the_call_that_ends_one():
    env = adapt(Relay(), seed=4, env_index=1)
    steps = _play(env)
    assert steps[-1].acting == ("a", "b", "c") and env.episode == 1
    assert np.all(steps[-1].obs["a"][0] == 0)  # the new match's first step count
    assert env.env.seeds_seen[:1] == [5]
