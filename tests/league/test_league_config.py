"""Self-play configs are refused before any rank starts when they cannot work, naming the
fix."""
from __future__ import annotations

import gymnasium as gym
import pytest

from hpcrl.config.loader import from_dict, to_dict
from hpcrl.errors import ConfigError

pytestmark = pytest.mark.quick
GAME = "pettingzoo.classic.connect_four_v3"
SPREAD = "mpe2.simple_spread_v3"  # a Parallel game: its agents share the policy (auto)


@pytest.mark.parametrize("data, says", [
    ({"env": {"id": GAME}}, "set actor.action_mask=true"),
    ({"env": {"id": GAME}, "actor": {"action_mask": True}, "algo": {"name": "dqn"}},
     "use ppo, a2c or impala"),
    ({"env": {"id": GAME, "normalize_obs": True}, "actor": {"action_mask": True}},
     "set env.normalize_obs=false"),
    ({"env": {"id": GAME, "league": {"latest_fraction": 1.5}}, "actor": {"action_mask": True}},
     "'env.league.latest_fraction' must be in [0, 1]"),
    ({"env": {"id": "pettingzoo.classic.no_such_game_v1"}, "actor": {"action_mask": True}},
     "no module 'pettingzoo.classic.no_such_game_v1'"),
    ({"env": {"id": GAME, "league": {"opponents": "best"}}, "actor": {"action_mask": True}},
     "env.league.opponents"),
    ({"env": {"id": GAME}, "actor": {"action_mask": True, "memory": "gru"}},
     "self-play takes feedforward actors"),
    ({"env": {"league": {"frozen": {"champion": "runs/x"}}}},
     "config keys 'env.league.*' are read by self-play on a multi-agent game; env.id "
     "CartPole-v1 is a single-agent env"),
    ({"env": {"agents": "shared"}}, "config key 'env.agents' (shared) says who plays"),
    ({"env": {"id": GAME, "agents": "shared"}, "actor": {"action_mask": True}},
     "is turn-based (PettingZoo's AEC API or OpenSpiel): train it by self-play"),
    ({"env": {"id": SPREAD, "multiagent": True, "num_envs": 8}, "actor": {"action_mask": True}},
     "'env.num_envs' (8) counts agents under env.agents=shared, 3 per game"),
    ({"env": {"id": SPREAD, "multiagent": True, "num_envs": 12},
      "actor": {"action_mask": True}, "scheme": {"env_groups": 3}},
     "a game of mpe2.simple_spread_v3 takes 3 slots of one group: make env.num_envs a "
     "multiple of 9"),
    ({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6,
              "league": {"opponents": "uniform"}}, "actor": {"action_mask": True}},
     "config keys 'env.league.*' are read when the league plays the other seats"),
    ({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6,
              "wrappers": ["gymnasium.wrappers:ClipReward"]}, "actor": {"action_mask": True}},
     "a wrapper would see every agent's rows at once"),
    ({"actor": {"action_mask": True}, "algo": {"name": "dqn"}},
     "acts with a policy of its own, which would ignore it"),
    ({"env": {"id": GAME, "preset": "atari"}, "actor": {"action_mask": True}},
     "a multi-agent game is played as it is"),
])
def test_what_cannot_work_is_refused_naming_the_fix(data, says):
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert says in str(err.value)


def test_a_self_play_config_loads_and_a_single_agent_one_is_unchanged():
    config = from_dict({"env": {"id": GAME}, "actor": {"action_mask": True}})
    assert config.env.league.opponents == "pfsp"
    assert not from_dict({}).actor.action_mask


def test_agents_sharing_a_policy_of_box_actions_take_any_algorithm_and_no_mask():
    config = from_dict({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6,
                                "kwargs": {"continuous_actions": True}},
                        "algo": {"name": "sac"}})
    assert config.algo.name == "sac" and not config.actor.action_mask


def test_a_population_of_agents_sharing_a_policy_needs_no_league():
    from hpcrl.population.member_run import check_population

    check_population(from_dict({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6},
                                "actor": {"action_mask": True},
                                "algo": {"ppo": {"minibatch_size": 48}},
                                "pbt": {"mutate": {"algo.lr": {"low": 1e-4, "high": 1e-3}}}}))


def test_an_actor_refuses_a_mask_it_cannot_read():
    from hpcrl.build import env_spaces, make_actor

    config = from_dict({"env": {"id": "Pendulum-v1"}, "actor": {"action_mask": True}})
    with pytest.raises(ValueError, match="one Discrete action from the end of a flat"):
        make_actor(config, env_spaces(config))


def test_a_population_of_self_play_members_is_refused_before_any_starts():
    from hpcrl.population.member_run import check_population

    config = from_dict({"env": {"id": GAME}, "actor": {"action_mask": True},
                        "pbt": {"mutate": {"algo.lr": {"low": 1e-4, "high": 1e-3}}}})
    with pytest.raises(ConfigError, match="would publish no league snapshots"):
        check_population(config)


def test_the_league_of_a_snapshot_file_is_its_runs(tmp_path):
    from hpcrl.cli.league import league_dir_of

    snap = tmp_path / "league" / "snapshots" / "main-000000000100.pt"
    snap.parent.mkdir(parents=True)
    snap.write_bytes(b"")
    (tmp_path / "config.yaml").write_text("{}")
    assert league_dir_of(snap) == tmp_path / "league"
    assert league_dir_of(tmp_path) == tmp_path / "league"


def test_the_plan_says_how_a_game_is_played():
    from hpcrl.scheme.plan import plan_text

    shared = plan_text(from_dict({"env": {"id": SPREAD, "multiagent": True, "num_envs": 6},
                                  "actor": {"action_mask": True},
                                  "algo": {"ppo": {"minibatch_size": 48}}}))
    assert ("game: mpe2.simple_spread_v3: its 3 agents share the trained policy" in shared
            and "2 games of 3 per collecting rank" in shared)
    league = plan_text(from_dict({"env": {"id": GAME}, "actor": {"action_mask": True}}))
    assert "self-play (env.agents=league), the trained policy takes one of 2 seats" in league
    assert "game:" not in plan_text(from_dict({}))


def test_auto_env_groups_keep_each_games_agents_together():
    from hpcrl.build import env_groups

    def pairs(num_envs: int):  # games of 2 agents
        return from_dict({"env": {"id": SPREAD, "multiagent": True, "num_envs": num_envs,
                                  "kwargs": {"N": 2}, "vectorization": "async"},
                          "actor": {"action_mask": True},
                          "algo": {"ppo": {"minibatch_size": 16 * num_envs}}})

    assert env_groups(pairs(6), remote=False) == 1  # 2 groups of 3 would cut a game
    assert env_groups(pairs(8), remote=False) == 2


def test_frozen_policies_must_play_this_game(tmp_path):
    """Checked by rank 0 as the run starts (the config's checks load no policies)."""
    from hpcrl.envs.vector import EnvSpaces
    from hpcrl.league.snapshots import publish
    from hpcrl.models.actor import ActorCritic
    from hpcrl.trained.saved_policy import saved_policy

    other = from_dict({})  # CartPole's: 4 observations, 2 moves
    spaces = EnvSpaces((4,), gym.spaces.Discrete(2))
    snap = publish(tmp_path, "cartpole", 0,
                   saved_policy(to_dict(other), spaces, ActorCritic(spaces, other.actor)))

    def refusal(frozen, player="main") -> str:  # refused as the run starts, before its envs
        from hpcrl.placement.serial_run import Trainer  # are made
        from hpcrl.runtime.run_dir import RunDir

        config = from_dict({"env": {"id": GAME, "league": {"frozen": frozen, "player": player}},
                            "actor": {"action_mask": True}})
        with pytest.raises(ConfigError) as err:
            Trainer(config, RunDir(tmp_path / "run"), console=None).train()
        assert not (tmp_path / "run" / "league").exists()
        return str(err.value)

    wrong = refusal({"pole": str(snap.path)})
    assert "observes [4] and acts discrete 2, but this game's trained policy" in wrong
    assert "has 7 moves" in wrong
    assert "no saved policy there" in refusal({"ghost": str(tmp_path / "nothing")})
    assert "is not 'main'" in refusal({"main": str(snap.path)})
    assert "is not 'alice' (the trained policy's, env.league.player)" in refusal(
        {"alice": str(snap.path)}, player="alice")
