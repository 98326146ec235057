"""Evaluation plays its episodes side by side: episode i starts from its own seed, so the
returns are the same whether the episodes run one at a time, in waves or all at once."""
import pytest
import torch

import hpcrl.evaluation as evaluation
from hpcrl.build import env_spaces
from hpcrl.config import from_dict
from hpcrl.core.actor import ActorCritic


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Blackjack-v1"])
def test_returns_do_not_depend_on_how_episodes_are_grouped(env_id, monkeypatch):
    config = from_dict({}, [f"env.id={env_id}"])
    torch.manual_seed(0)
    actor = ActorCritic(env_spaces(config), config.actor)  # untrained: varied episodes
    together = evaluation.evaluate(actor, config, 7)["returns"]
    for parallel in (1, 3):
        monkeypatch.setattr(evaluation, "MAX_PARALLEL_EPISODES", parallel)
        assert evaluation.evaluate(actor, config, 7)["returns"] == together
    assert len(together) == 7 and len(set(together)) > 1  # distinct seeds, distinct games
