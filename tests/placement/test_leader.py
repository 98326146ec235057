"""Rank 0's final evaluation copies a learner's policy to the CPU by rebuilding the
algorithm's own acting policy there (its class's ``policy_for``) and loading the weights:
the same for either family, as ``load_policy`` rebuilds a saved one."""
import pytest
import torch

from hpcrl.algorithms import make_policy
from hpcrl.build import env_spaces
from hpcrl.config import from_dict
from hpcrl.placement.leader import weights_into

AGENTS = {
    "ppo": [],
    "dqn": ["algo.name=dqn"],
    "sac": ["algo.name=sac", "env.id=Pendulum-v1"],
    "mpc": ["algo.name=mpc", "env.id=Pendulum-v1"],
}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_policy_of_either_family_is_rebuilt_with_its_weights(agent):
    config = from_dict({}, AGENTS[agent])
    spaces = env_spaces(config)
    trained = make_policy(config, spaces)
    with torch.no_grad():  # the learner's weights are no longer the fresh ones
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    host = weights_into(make_policy(config, spaces), trained)
    assert type(host) is type(trained)
    trained_state, host_state = trained.state_dict(), host.state_dict()
    assert trained_state.keys() == host_state.keys()
    assert all(torch.equal(trained_state[k], host_state[k]) for k in trained_state)
