"""Algorithms declare what they learn from and support (issue 28.1): the checks, the planner
and the placements read those declarations, and no module outside the registries branches
on an algorithm's name."""
from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from hpcrl import PPO, OnPolicyAlgorithm
from hpcrl.algorithms import (
    BUILT_IN_ALGOS,
    action_space_problem,
    algorithm_capabilities,
    algorithms_with,
)
from hpcrl.config import ConfigError, load_config
from hpcrl.envs.vector import spaces_of

HPCRL = Path(__file__).resolve().parents[2] / "hpcrl"
# the modules that map names to classes or defaults: the registrations themselves
REGISTRIES = {"algorithms/__init__.py", "config/algo_defaults.py", "scheme/presets.py"}
NAME_BRANCH = re.compile(r"algo\.(name|kind)\s*(==|!=|in\b|not in\b)|"
                         r"""\bname\s*(==|!=)\s*["'](ppo|a2c|impala|dqn|sac|td3|ddpg|mpo|mpc)["']""")


def test_every_built_in_declares_its_family():
    for name in BUILT_IN_ALGOS:
        caps = algorithm_capabilities(name)
        assert caps.replay == (caps.storage == "replay"), name
        assert caps.recurrent == (not caps.replay), name
    assert algorithm_capabilities("impala").storage == "vtrace"
    assert algorithm_capabilities("ppo").minibatched_epochs
    assert not algorithm_capabilities("a2c").minibatched_epochs
    assert algorithm_capabilities("dqn").actions == ("discrete",)
    assert algorithms_with(lambda c: c.replay) == ("dqn", "sac", "td3", "ddpg", "mpo", "mpc")
    assert algorithms_with(lambda c: c.goal_relabelling) == ("sac", "td3", "ddpg", "mpo")
    assert algorithms_with(lambda c: c.predicts_observations) == ("mpc",)
    assert algorithms_with(lambda c: not c.remote_acting) == ("mpc",)


class MyPPO(PPO):
    """A plug-in subclass: it inherits PPO's capabilities."""


class MyVtrace(OnPolicyAlgorithm):
    """A direct subclass wanting V-trace batches: its storage attribute decides."""

    storage = "vtrace"
    stat_names = ("loss",)

    def minibatches(self, storage, update, seed, total_envs, count):
        return iter(())

    def steps_per_update(self, storage):
        return 1

    def loss(self, batch):
        raise AssertionError("not trained here")


def test_a_plug_in_inherits_or_declares_its_capabilities(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1]))
    caps = algorithm_capabilities(f"{__name__}:MyPPO")
    assert caps == algorithm_capabilities("ppo")
    assert algorithm_capabilities(f"{__name__}:MyVtrace").storage == "vtrace"
    # the checks read them: a plug-in PPO gets PPO's minibatch check
    with pytest.raises(ConfigError, match="algo.ppo.minibatch_size"):
        load_config(None, [f"algo.name={__name__}:MyPPO", "algo.ppo.minibatch_size=7"])


def test_action_space_refusals_follow_the_declared_spaces():
    box = spaces_of(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,), np.float32), "e")
    multi = spaces_of(gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([2, 3]), "e")
    unbounded = spaces_of(gym.spaces.Box(-1, 1, (3,)),
                          gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "e")
    assert ("dqn needs a Discrete action space" in action_space_problem("dqn", box, "e")
            and "use sac, td3, ddpg, mpo or mpc for continuous actions"
            in action_space_problem("dqn", box, "e"))
    assert "use ppo, which acts in any action space" in action_space_problem("sac", multi, "e")
    assert "unbounded actions" in action_space_problem("td3", unbounded, "e")
    assert action_space_problem("sac", box, "e") is None


def test_the_plan_says_what_the_algorithm_learns_from():
    from hpcrl.scheme.plan import plan_json, plan_text

    assert "algorithm: off-policy, learns from a replay, explores by epsilon-greedy" \
        in plan_text(load_config(None, ["scheme.preset=apex"]))
    info = plan_json(load_config(None, ["algo.name=impala"]))["capabilities"]
    assert info["storage"] == "vtrace" and info["learns_from"] == "rollouts"


def test_no_module_outside_the_registries_branches_on_an_algorithm_name():
    found = []
    for path in HPCRL.rglob("*.py"):
        relative = path.relative_to(HPCRL).as_posix()
        if relative in REGISTRIES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if NAME_BRANCH.search(code):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, ("branches on an algorithm's name (read "
                       "algorithm_capabilities(config.algo.name)):\n" + "\n".join(found))
