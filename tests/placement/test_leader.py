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


class _Said:
    """A job and writer as much as the leader's env-failure lines use of them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env_note = None

    def say(self, line: str) -> None:
        self.lines.append(line)


class _Notes:
    def __init__(self, lines):
        self.pending = list(lines)

    def take(self, count):
        taken, self.pending = self.pending, []
        return taken

    def take_from(self, ranks):
        return self.take(len(ranks))


@pytest.mark.parametrize("first", ["update", "checkpoint"])
def test_the_stop_for_a_failed_env_is_said_once_whichever_way_rank_0_hears_first(first):
    # a learner's count in an update, or a collector's failed state at a checkpoint, may
    # tell rank 0 first: either way the job says once that it checkpoints and stops
    from hpcrl.placement.leader import Leader

    leader = object.__new__(Leader)
    leader.job = leader.writer = said = _Said()
    leader.failures = _Notes(["rank 1 (collector): env 0 failed"])
    if first == "update":
        leader._note_env_failures(1)
    else:
        leader._say_failures(leader.failures.take_from([1]))
    leader._note_env_failures(1)  # the other way hears of the same failure later
    leader.failures.pending = ["rank 2 (collector): env 1 failed"]
    leader._say_failures(leader.failures.take_from([2]))
    stops = [line for line in said.lines if "checkpointing and stopping with exit status 4" in line]
    assert len(stops) == 1 and said.lines[0] == "hpcrl: rank 1 (collector): env 0 failed"
    assert said.env_note == "rank 1 (collector): env 0 failed; rank 2 (collector): env 1 failed"
