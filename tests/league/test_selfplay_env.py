"""The self-play env: one opponent a match, legal moves honoured, exact state, any game."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hpcrl.config.loader import from_dict, to_dict
from hpcrl.envs.make import make_env
from hpcrl.envs.vector import EnvSpaces
from hpcrl.league.match_log import read_matches
from hpcrl.league.snapshots import publish
from hpcrl.models.actor import ActorCritic
from hpcrl.trained.saved_policy import saved_policy

pytestmark = pytest.mark.quick
TICTACTOE = "pettingzoo.classic.tictactoe_v3"


def _config(league_dir: Path | None = None, **league):
    return from_dict({"env": {"id": TICTACTOE, "league": league},
                      "actor": {"action_mask": True, "hidden_sizes": [16]}})


def _actor(env, seed: int) -> ActorCritic:
    torch.manual_seed(seed)
    spaces = EnvSpaces(env.observation_space.shape, env.action_space)
    return ActorCritic(spaces, _config().actor)


def _league(folder: Path, env, count: int) -> None:
    """``count`` snapshots of differently seeded actors."""
    data = to_dict(_config())
    spaces = EnvSpaces(env.observation_space.shape, env.action_space)
    for k in range(count):
        publish(folder, "main", 100 * (k + 1), saved_policy(data, spaces, _actor(env, k)))


def _random_moves(env, obs, rng, steps, trace):
    """Play random legal moves for ``steps`` steps, tracing what the env says."""
    for _ in range(steps):
        legal = np.flatnonzero(obs[-9:] > 0.5)
        obs, reward, term, trunc, _ = env.step(int(rng.choice(legal)))
        inner = env.unwrapped
        trace.append((obs.tobytes(), reward, term, trunc, inner.opponent, inner.seat))
        if term or trunc:
            obs, _ = env.reset()
    return obs


def test_an_opponent_never_changes_inside_a_match(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HPCRL_LEAGUE_DIR", str(tmp_path))
    env = make_env(_config(opponents="uniform", latest_fraction=0.0).env)
    _league(tmp_path, env, 3)
    obs, _ = env.reset(seed=4)
    trace: list = []
    _random_moves(env, obs, np.random.default_rng(0), 400, trace)
    matches, current = [], [trace[0][4]]
    for (_, _, term, trunc, opponent, _), nxt in zip(trace, trace[1:] + [None], strict=True):
        assert opponent == current[-1]  # the opponent the match started with
        if term or trunc:
            matches.append(opponent)
            if nxt is not None:
                current.append(nxt[4])
    assert len(set(matches)) == 3  # every snapshot played, each match against one
    logged = [row.opponent for row in read_matches(tmp_path)]
    assert logged == matches  # the log says who was played, match by match
    seats = {row.player_seat for row in read_matches(tmp_path)}
    assert seats == {"player_1", "player_2"}  # the trained policy plays every seat in turn


def test_a_snapshot_joins_at_the_collection_after_the_one_it_was_published_in(
        tmp_path: Path, monkeypatch):
    """The job's clock, not the file's arrival, decides: snapshots taken at 100, 200, 300
    env steps; a collector says 0, 150, 250, 400 as its collections start."""
    monkeypatch.setenv("HPCRL_LEAGUE_DIR", str(tmp_path))
    env = make_env(_config(opponents="uniform", latest_fraction=0.0).env)
    _league(tmp_path, env, 3)  # all on disk already: only the clock holds them back
    env.unwrapped.hpcrl_job_clock(0)
    obs, _ = env.reset(seed=4)
    met: list[set[str]] = []
    for clock in (150, 250, 400):
        env.unwrapped.hpcrl_job_clock(clock)
        trace: list = []
        obs = _random_moves(env, obs, np.random.default_rng(clock), 120, trace)
        met.append({step[4] for step in trace})
    assert met[0] == {"random"}  # none before the second collection
    assert met[1] == {"random", "main-100"}
    assert met[2] >= {"main-100", "main-200"} and "main-300" not in met[2]
    state = env.unwrapped.get_state()
    again = make_env(_config(opponents="uniform", latest_fraction=0.0).env)
    again.reset(seed=4)
    again.unwrapped.set_state(state)  # a resume keeps where the clock was
    assert again.unwrapped._league_upto() == 250
    free = make_env(_config(eval_opponent="latest").env, whole_games=True)  # evaluation's
    free.reset(seed=4)
    assert free.unwrapped.opponent == "main-300"


def test_rewards_of_the_opponents_turn_reach_the_trained_policy(monkeypatch, tmp_path):
    monkeypatch.setenv("HPCRL_LEAGUE_DIR", str(tmp_path))
    env = make_env(_config().env)
    obs, _ = env.reset(seed=0)
    trace: list = []
    _random_moves(env, obs, np.random.default_rng(1), 300, trace)
    finals = [reward for _, reward, term, _, _, _ in trace if term]
    assert set(finals) == {-1.0, 0.0, 1.0}  # losses arrive on the opponent's winning move
    rows = read_matches(tmp_path)
    assert [row.ret for row in rows] == finals
    assert {row.outcome for row in rows} == {"win", "draw", "loss"}


def test_masked_actors_never_choose_an_illegal_move_and_the_loss_agrees():
    env = make_env(_config().env)
    actor = _actor(env, 0)
    obs = np.stack([env.reset(seed=s)[0] for s in range(64)])
    obs[:, -9:] = np.random.default_rng(0).random((64, 9)) < 0.3
    obs[:, -1] = 1.0  # at least one legal move each
    legal = obs[:, -9:] > 0.5
    engine = actor.acting_engine()
    noise = np.random.default_rng(1).random(64).astype(np.float32)
    noise[:8] = 1.0  # a uniform the cumulative sum can round past every legal move
    step = engine.step(obs, noise)
    assert legal[np.arange(64), step.actions].all()
    with torch.no_grad():
        actions, log_probs, _, _ = actor.step(torch.from_numpy(obs), torch.from_numpy(noise))
    assert np.array_equal(actions.numpy(), step.actions)
    np.testing.assert_allclose(log_probs.numpy(), step.log_probs, atol=1e-5)
    out = actor.evaluate_outputs(torch.from_numpy(obs), actions, predict=False)
    np.testing.assert_allclose(out.log_probs.detach().numpy(), step.log_probs, atol=1e-5)
    probs = torch.softmax(out.params, dim=-1).detach().numpy()
    assert (probs[~legal] == 0).all() and np.isfinite(out.entropy.detach().numpy()).all()
    modes = actor(torch.from_numpy(obs)).numpy()  # evaluation's deterministic moves
    assert legal[np.arange(64), modes].all()


def test_a_restored_env_replays_its_match_and_cuts_its_log(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HPCRL_LEAGUE_DIR", str(tmp_path))
    env = make_env(_config(opponents="pfsp").env)
    _league(tmp_path, env, 2)
    obs, _ = env.reset(seed=9)
    obs = _random_moves(env, obs, np.random.default_rng(2), 37, [])
    state = env.unwrapped.get_state()
    log = tmp_path / "matches" / "env-9.csv"
    kept = log.read_bytes()
    after: list = []
    _random_moves(env, obs, np.random.default_rng(3), 60, after)
    logged = log.read_bytes()
    again = make_env(_config(opponents="pfsp").env)
    again.reset(seed=9)
    again.unwrapped.set_state(state)
    assert log.read_bytes() == kept  # the matches after the checkpoint are played again
    replayed: list = []
    _random_moves(again, obs, np.random.default_rng(3), 60, replayed)
    assert replayed == after
    assert [line.split(",")[1:] for line in log.read_text().splitlines()] == \
        [line.split(",")[1:] for line in logged.decode().splitlines()]  # wall times aside


@pytest.mark.parametrize("game", ["openspiel:tic_tac_toe", "pettingzoo.classic.connect_four_v3"])
def test_openspiel_and_pettingzoo_games_play(game, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCRL_LEAGUE_DIR", str(tmp_path))
    env = make_env(from_dict({"env": {"id": game}, "actor": {"action_mask": True}}).env)
    n = env.action_space.n
    obs, _ = env.reset(seed=1)
    rng, ends = np.random.default_rng(0), 0
    for _ in range(200):
        obs, reward, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(obs[-n:]))))
        if term or trunc:
            ends += 1
            obs, _ = env.reset()
    assert ends > 5 and len(read_matches(tmp_path)) == ends
