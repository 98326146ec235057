"""Making multi-agent envs from names: PettingZoo modules, registry ids, the user's
``module:function``, OpenSpiel games, and the errors that name the problem and the fix."""
from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from hpcrl.envs.multiagent import named_envs as make_module
from hpcrl.envs.multiagent.aec import AECSeats
from hpcrl.envs.multiagent.named_envs import (
    EXTRA,
    MultiAgentEnvError,
    make_pettingzoo,
    make_seat_env,
    multiagent_env_problem,
)
from hpcrl.envs.multiagent.parallel import ParallelSeats
from hpcrl.envs.multiagent.seat_vector import make_seat_vector


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_pettingzoo_module_makes_its_aec_env():
    env = make_seat_env("pettingzoo.classic.connect_four_v3", seed=0)
    assert isinstance(env, AECSeats) and env.seats == ("player_0", "player_1")


def test_a_registry_id_makes_its_env():
    env = make_seat_env("classic/connect_four-v3", seed=0)
    assert isinstance(env, AECSeats) and env.reset().acting == ("player_0",)
    assert "not in PettingZoo's registry" in multiagent_env_problem("classic/connect_five-v1")


def test_a_module_function_makes_the_users_env_with_keyword_arguments():
    env = make_seat_env("ma_envs:relay", seed=0, join=False)
    assert isinstance(env, ParallelSeats) and not env.env.join


def test_a_module_with_both_apis_is_made_parallel(tmp_path, monkeypatch):
    _module(tmp_path, monkeypatch, "both_apis", """
        from ma_envs import Relay
        from pettingzoo.utils.conversions import parallel_to_aec
        def parallel_env():
            return Relay()
        def env():
            return parallel_to_aec(Relay())
    """)
    assert isinstance(make_seat_env("both_apis", seed=0), ParallelSeats)


def test_an_openspiel_game_plays_to_a_draw():
    envs = make_seat_vector("openspiel:tic_tac_toe", 1, seed=0)
    step = envs.reset()
    for cell in (0, 1, 2, 4, 3, 5, 7, 6, 8):  # x o x / x o o / o x x
        (seat,) = (s for k, s in enumerate(envs.seats) if step.acting[0, k])
        assert step.masks[seat][0, cell]
        step = envs.step({s: [cell] for s in envs.seats})
    (match,) = step.matches
    # shimmy flags both terminated and truncated at a game's end: termination wins
    assert step.terminated[0].all() and not step.truncated[0].any()
    assert match.outcomes == {"player_0": "draw", "player_1": "draw"} and match.length == 9


def test_an_unknown_module_is_named_with_the_fix():
    problem = multiagent_env_problem("pettingzoo.classic.connect_five_v1")
    assert "no module 'pettingzoo.classic.connect_five_v1'" in problem
    assert "module:function" in problem
    with pytest.raises(MultiAgentEnvError, match="no module 'no_such_games'"):
        make_pettingzoo("no_such_games:make")


def test_a_missing_dependency_is_named(tmp_path, monkeypatch):
    _module(tmp_path, monkeypatch, "needs_a_package", "import not_installed_physics\n")
    problem = multiagent_env_problem("needs_a_package:make")
    assert "cannot import what it needs" in problem
    assert "install the package that provides 'not_installed_physics'" in problem


def test_a_module_without_an_env_or_a_function_that_makes_none_is_refused(tmp_path,
                                                                         monkeypatch):
    _module(tmp_path, monkeypatch, "not_games", "def make():\n    return 42\n")
    assert "neither parallel_env() nor env()" in multiagent_env_problem("not_games")
    assert "no function 'other'" in multiagent_env_problem("not_games:other")
    with pytest.raises(MultiAgentEnvError, match="made a int, not a PettingZoo env"):
        make_pettingzoo("not_games:make")


def test_without_pettingzoo_the_error_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(make_module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pettingzoo" else real(name, *a))
    problem = multiagent_env_problem("pettingzoo.classic.connect_four_v3")
    assert "needs PettingZoo, which is not installed" in problem and EXTRA in problem
    assert EXTRA == "pip install 'hpcrl[multiagent]'"


def test_an_unknown_openspiel_game_is_named():
    with pytest.raises(MultiAgentEnvError, match="OpenSpiel cannot load game 'no_such_game'"):
        make_pettingzoo("openspiel:no_such_game")
    assert multiagent_env_problem("openspiel:tic_tac_toe") is None
