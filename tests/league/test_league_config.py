"""Self-play configs are refused before any rank starts when they cannot work, naming the
fix."""
from __future__ import annotations

import pytest

from hpcrl.config.loader import from_dict
from hpcrl.errors import ConfigError

pytestmark = pytest.mark.quick
GAME = "pettingzoo.classic.connect_four_v3"


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
    ({"actor": {"action_mask": True}, "algo": {"name": "dqn"}},
     "acts with a policy of its own, which would ignore it"),
])
def test_what_cannot_work_is_refused_naming_the_fix(data, says):
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert says in str(err.value)


def test_a_self_play_config_loads_and_a_single_agent_one_is_unchanged():
    config = from_dict({"env": {"id": GAME}, "actor": {"action_mask": True}})
    assert config.env.league.opponents == "pfsp"
    assert not from_dict({}).actor.action_mask


def test_an_actor_refuses_a_mask_it_cannot_read():
    from hpcrl.build import env_spaces, make_actor

    config = from_dict({"env": {"id": "Pendulum-v1"}, "actor": {"action_mask": True}})
    with pytest.raises(ValueError, match="one Discrete action from the end of a flat"):
        make_actor(config, env_spaces(config))
