"""Outcomes of finished matches from their final rewards, and the tally a checkpoint keeps."""
from __future__ import annotations

from hpcrl.envs.multiagent.matches import MatchTracker, zero_sum_outcomes
from hpcrl.envs.multiagent.seats import EpisodeEnd

SEATS = ("p0", "p1")


def _end(finals: tuple[float, float], truncated: bool = False) -> EpisodeEnd:
    return EpisodeEnd(3, 5, 8, SEATS, dict(zip(SEATS, finals, strict=True)),
                      dict(zip(SEATS, finals, strict=True)), dict.fromkeys(SEATS, not truncated),
                      dict.fromkeys(SEATS, truncated), 9)


def test_zero_sum_final_rewards_give_win_loss_and_draw():
    assert zero_sum_outcomes(_end((1.0, -1.0))) == {"p0": "win", "p1": "loss"}
    assert zero_sum_outcomes(_end((-1.0, 1.0))) == {"p0": "loss", "p1": "win"}
    assert zero_sum_outcomes(_end((0.0, 0.0))) == {"p0": "draw", "p1": "draw"}


def test_cut_short_or_not_zero_sum_matches_have_no_outcome():
    assert zero_sum_outcomes(_end((1.0, -1.0), truncated=True)) is None
    assert zero_sum_outcomes(_end((-0.5, -0.5))) is None  # a shared (cooperative) reward


def test_the_tracker_records_results_and_keeps_its_tally_across_a_checkpoint():
    tracker = MatchTracker(SEATS)
    result = tracker.record(_end((1.0, -1.0)))
    assert (result.env_index, result.episode, result.seed, result.length) == (3, 5, 8, 9)
    assert result.outcomes == {"p0": "win", "p1": "loss"}
    tracker.record(_end((0.0, 0.0)))
    tracker.record(_end((2.0, 2.0)))  # no outcome: counted as a match only
    assert tracker.matches == 3
    assert tracker.tally == {"p0": {"win": 1, "draw": 1, "loss": 0},
                             "p1": {"win": 0, "draw": 1, "loss": 1}}
    resumed = MatchTracker(SEATS)
    resumed.load_state(tracker.state())
    assert (resumed.matches, resumed.tally) == (tracker.matches, tracker.tally)
    assert MatchTracker(SEATS, outcome=None).record(_end((1.0, -1.0))).outcomes is None
