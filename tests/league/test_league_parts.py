"""The league's parts alone: opponent sampling (PFSP), snapshots, the match log, ratings."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from hpcrl.league.match_log import MatchLog, MatchRow, read_matches
from hpcrl.league.opponents import RANDOM, OpponentSampler, pfsp_weights
from hpcrl.league.ratings import ELO_START, rate
from hpcrl.league.snapshots import drop_after, publish, snapshots
from hpcrl.league.standings import standings

pytestmark = pytest.mark.quick


def test_pfsp_weights_are_alphastars_hard_and_variance():
    p = np.array([0.9, 0.5, 0.1])
    hard = pfsp_weights(p, "hard")
    np.testing.assert_allclose(hard, np.array([0.01, 0.25, 0.81]) / 1.07)
    variance = pfsp_weights(p, "variance")
    np.testing.assert_allclose(variance, np.array([0.09, 0.25, 0.09]) / 0.43)
    np.testing.assert_allclose(pfsp_weights(np.ones(3), "hard"), np.full(3, 1 / 3))


def test_pfsp_plays_the_opponents_it_loses_to_most():
    sampler = OpponentSampler("pfsp", "hard", seed=3)
    for _ in range(40):  # beats 'easy' always, loses to 'hard' always
        sampler.record("easy", "win")
        sampler.record("hard", "loss")
    picks = [sampler.choose(["easy", "hard"]) for _ in range(400)]
    assert picks.count("hard") > 0.95 * len(picks)
    assert sampler.win_rate("easy") == pytest.approx(40.5 / 41)
    assert sampler.win_rate("unplayed") == 0.5


def test_modes_and_the_latest_fraction():
    assert OpponentSampler("latest").choose([]) == RANDOM
    assert {OpponentSampler("latest", seed=s).choose(["a", "b"]) for s in range(20)} == {"b"}
    uniform = OpponentSampler("uniform", latest_fraction=0.8, seed=1)
    picks = [uniform.choose(["a", "b", "c"]) for _ in range(3000)]
    assert picks.count("c") / len(picks) == pytest.approx(0.8 + 0.2 / 3, abs=0.03)


def test_a_sampler_resumed_from_its_state_draws_what_it_would_have():
    one = OpponentSampler("pfsp", "variance", 0.1, seed=7)
    for outcome in ("win", "loss", "draw", "win"):
        one.record("a", outcome)
    one.choose(["a", "b"])
    state = one.state()
    two = OpponentSampler("pfsp", "variance", 0.1, seed=0)
    two.load_state(state)
    assert [one.choose(["a", "b", "c"]) for _ in range(50)] == \
        [two.choose(["a", "b", "c"]) for _ in range(50)]


def test_snapshots_are_immutable_and_a_resume_drops_the_later_ones(tmp_path: Path):
    first = publish(tmp_path, "main", 100, {"w": 1})
    assert not os.stat(first.path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    again = publish(tmp_path, "main", 100, {"w": 2})  # the same name keeps the file
    assert again.path.read_bytes() == first.path.read_bytes()
    publish(tmp_path, "main", 300, {"w": 3})
    publish(tmp_path, "main", 200, {"w": 4})
    assert [s.name for s in snapshots(tmp_path)] == ["main-100", "main-200", "main-300"]
    assert [s.name for s in snapshots(tmp_path, upto=200)] == ["main-100", "main-200"]
    assert [s.name for s in drop_after(tmp_path, 150)] == ["main-200", "main-300"]
    assert [s.name for s in snapshots(tmp_path)] == ["main-100"]


def _row(t: float, opponent: str, outcome: str, match: int = 0) -> MatchRow:
    return MatchRow(t, 5, match, 11, "main", "player_0", opponent, "player_1", outcome,
                    {"win": 1.0, "loss": -1.0}.get(outcome, 0.0), 9)


def test_the_match_log_is_cut_back_to_a_checkpoints_length(tmp_path: Path):
    log = MatchLog(tmp_path, 5)
    log.append(_row(1.0, "random", "win", 0))
    kept = log.length()
    log.append(_row(2.0, "main-100", "loss", 1))
    assert [r.opponent for r in read_matches(tmp_path)] == ["random", "main-100"]
    log.cut_to(kept)
    assert read_matches(tmp_path) == [_row(1.0, "random", "win", 0)]


def test_elo_and_openskill_rate_the_winner_up():
    rows = [_row(float(t), "random", "win", t) for t in range(20)]
    elo = rate(rows, "elo")
    assert elo.rating("main") > ELO_START > elo.rating("random")
    first = rate(rows[:1], "elo")
    assert first.rating("main") == pytest.approx(ELO_START + 8.0)  # K 16, even odds
    skill = rate(rows, "openskill")
    assert skill.rating("main") > skill.rating("random")
    table, _ = standings(rows + [_row(30.0, "main-100", "draw", 30)], "elo")
    assert [(s.opponent, s.games, s.wins, s.draws) for s in table] == [
        ("random", 20, 20, 0), ("main-100", 1, 0, 1)]
    assert table[0].win_rate == 1.0 and table[1].win_rate == 0.5
