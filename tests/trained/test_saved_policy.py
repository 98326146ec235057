"""Policy records read back: what the record says its state dict fits, or, for a record
written before records said so, what the algorithm's class declares."""
from __future__ import annotations

import pytest
import torch

from hpcrl.algorithms import algorithm_type, make_policy
from hpcrl.build import env_spaces
from hpcrl.config import load_config
from hpcrl.config.loader import to_dict
from hpcrl.models.actor import ActorCritic
from hpcrl.trained.saved_policy import actor_from_saved, saved_policy


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
@pytest.mark.parametrize("old", [False, True])
def test_a_record_rebuilds_the_policy_it_was_written_from(algo, old):
    config = load_config(None, [f"algo.name={algo}", "env.id=CartPole-v1"])
    spaces = env_spaces(config)
    policy = make_policy(config, spaces)
    record = saved_policy(to_dict(config), spaces, policy)
    if old:  # a record from before "acts_with": its class's declaration decides
        del record["acts_with"]
    rebuilt = actor_from_saved(record)
    assert type(rebuilt) is type(policy)
    assert isinstance(rebuilt, ActorCritic) == (
        algorithm_type(algo).saved_policy_kind == "actor_critic")
    for name, value in policy.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[name], value), name
