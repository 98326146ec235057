"""Both families implement one contract, ``hpcrl.Algorithm``, sit in one registry and are
built by one constructor: a driver that knows only the contract trains a PPO and a DQN
alike (a class that derives from the contract but from neither family's base is refused in
tests/components/test_plugins.py, naming the bases to use; a plug-in written for the constructors of
before is refused here, naming the one signature)."""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import hpcrl
from hpcrl.algorithms import (
    ALGORITHMS,
    BUILT_IN_ALGOS,
    CONSTRUCTOR,
    OffPolicyAlgorithm,
    algorithm_capabilities,
    algorithm_type,
    make_algorithm,
)
from hpcrl.build import env_spaces
from hpcrl.config import from_dict
from hpcrl.numerics.flat import contiguous_parameters


def drive(algo: hpcrl.Algorithm, batch: object, steps: range, total: int = 4) -> None:
    """Train through the contract alone, as a placement does: progress, gradient, step."""
    for step in steps:
        algo.set_progress(step / total)
        grads, stats = algo.compute_gradients(batch)
        assert set(stats) >= set(algo.stat_names)
        figures = algo.apply_gradients(grads.clone())
        assert figures["learning_rate"] == pytest.approx(algo.learning_rate)


def ppo_and_batch() -> tuple[hpcrl.Algorithm, object]:
    config = from_dict({}, ["algo.lr_schedule=linear"])
    spaces = env_spaces(config)
    algo = make_algorithm(config, spaces)
    rng = np.random.default_rng(0)
    size = 64
    obs = torch.as_tensor(rng.normal(size=(size, *spaces.obs_shape)), dtype=torch.float32)
    actions = torch.as_tensor(rng.integers(0, 2, size))
    with torch.no_grad():
        log_probs, _, values = algo.actor.evaluate(obs, actions)
    advantages = torch.as_tensor(rng.normal(size=size), dtype=torch.float32)
    return algo, hpcrl.RolloutBatch(obs, actions, log_probs, values, advantages,
                                    values + advantages)


def dqn_and_batch() -> tuple[hpcrl.Algorithm, object]:
    config = from_dict({}, ["algo.name=dqn", "algo.lr_schedule=linear"])
    spaces = env_spaces(config)
    algo = make_algorithm(config, spaces)
    rng = np.random.default_rng(0)
    size = 64
    obs = torch.as_tensor(rng.normal(size=(size, *spaces.obs_shape)), dtype=torch.float32)
    return algo, hpcrl.ReplayBatch(
        obs=obs, actions=torch.as_tensor(rng.integers(0, 2, size)),
        rewards=torch.ones(size), discounts=torch.full((size,), 0.99),
        next_obs=obs + 0.1, weights=None, indices=np.arange(size))


def test_every_built_in_algorithm_implements_the_one_contract():
    assert BUILT_IN_ALGOS == tuple(ALGORITHMS)  # one registry holds both families
    for name in BUILT_IN_ALGOS:
        cls = algorithm_type(name)
        assert issubclass(cls, hpcrl.Algorithm) and not inspect.isabstract(cls), name
        assert cls.stat_names, name
        # the arguments hpcrl passes, named as the constructor names them
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        assert params[:4] == list(cls.constructor_args) == [
            "spaces", "settings", "device", "reducer"], name
        assert algorithm_capabilities(name).learns_from == (
            "replay" if issubclass(cls, OffPolicyAlgorithm) else "rollouts")
        assert cls.runs_as() == name  # each built-in declares itself
    assert issubclass(hpcrl.OnPolicyAlgorithm, hpcrl.Algorithm)
    assert issubclass(hpcrl.OffPolicyAlgorithm, hpcrl.Algorithm)


@pytest.mark.parametrize("make", [ppo_and_batch, dqn_and_batch], ids=["ppo", "dqn"])
def test_a_driver_that_knows_only_the_contract_trains_either_family(make):
    algo, batch = make()
    policy = contiguous_parameters(algo.policy).detach().clone()
    first_rate = algo.learning_rate
    drive(algo, batch, range(2))
    halfway = contiguous_parameters(algo.policy).detach().clone(), algo.state_dict()
    drive(algo, batch, range(2, 4))
    # the policy that acts moved, and the linear schedule followed the progress given
    assert not torch.equal(contiguous_parameters(algo.policy), policy)
    assert algo.learning_rate == pytest.approx(first_rate * (1 - 3 / 4))

    def resumed(with_state: bool) -> torch.Tensor:
        """A fresh algorithm given the halfway weights (and state), trained the second half."""
        again, _ = make()
        with torch.no_grad():
            contiguous_parameters(again.policy).copy_(halfway[0])
        if with_state:
            again.load_state_dict(halfway[1])
        drive(again, batch, range(2, 4))
        return contiguous_parameters(again.policy)

    # the contract's state (optimisers, step counts, targets) is what the weights alone lack:
    # restored, the second half is taken again bit for bit; without it, it is not
    assert torch.equal(resumed(with_state=True), contiguous_parameters(algo.policy))
    assert not torch.equal(resumed(with_state=False), contiguous_parameters(algo.policy))



@pytest.mark.parametrize("name", ["FailingPPO", "FailingDQN"])
def test_a_plugin_whose_constructor_fails_is_named_with_the_one_call(name, monkeypatch):
    from hpcrl.components.import_paths import PluginError

    tests = Path(__file__).parents[1]
    monkeypatch.syspath_prepend(str(tests / "placement" / "mpi"))  # the broken components
    monkeypatch.syspath_prepend(str(tests.parent / "examples"))  # what they import
    config = from_dict({}, [f"algo.name=hpcrl_testplugins:{name}"])
    spaces = env_spaces(config)
    with pytest.raises(PluginError) as err:
        make_algorithm(config, spaces)
    call = CONSTRUCTOR.replace("Class", name)
    assert (f"building it as {call} failed: RuntimeError: lab cluster license not found"
            in str(err.value))


@pytest.mark.parametrize("name", ["OldSignaturePPO", "OldSignatureDQN", "WholeConfigDQN"])
def test_a_plugin_with_the_constructor_of_before_is_refused_naming_the_fix(name,
                                                                           monkeypatch):
    from hpcrl.config.loader import ConfigError

    tests = Path(__file__).parents[1]
    monkeypatch.syspath_prepend(str(tests / "placement" / "mpi"))
    monkeypatch.syspath_prepend(str(tests.parent / "examples"))
    with pytest.raises(ConfigError) as err:
        from_dict({}, [f"algo.name=hpcrl_testplugins:{name}"])
    assert "does not take hpcrl's arguments; every algorithm is built as" in str(err.value)
    assert ("__init__(self, spaces, settings, device='cpu', reducer=None, *, <your keyword "
            "arguments>) and call super().__init__(spaces, settings, device, reducer)"
            in str(err.value))
    assert "settings.actor, settings.env" in str(err.value)  # what the settings hold


@pytest.mark.parametrize("name, section", [("ppo", "ppo"), ("dqn", "dqn"), ("a2c", None)])
def test_an_algorithm_is_built_from_its_settings_not_the_whole_config(name, section):
    from hpcrl.algorithms.registry import algorithm_settings
    from hpcrl.sections.schema import Config

    config = from_dict({}, [f"algo.name={name}", "train.on_nonfinite=skip_update"])
    settings = algorithm_settings(config)
    assert settings.own is (getattr(config.algo, section) if section else None)
    assert (settings.actor, settings.seed, settings.on_nonfinite) == (
        config.actor, config.seed, "skip_update")
    algo = make_algorithm(config, env_spaces(config))
    assert algo.settings == settings and algo.own is settings.own
    # what it keeps is its part of the config: never the whole (the scheme, the budget)
    assert not any(isinstance(value, Config) for value in vars(algo).values())
