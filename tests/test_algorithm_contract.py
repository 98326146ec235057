"""Both families implement one contract, ``hpcrl.Algorithm``: a driver that knows only the
contract trains a PPO and a DQN alike (a class that derives from the contract but from
neither family's base is refused in tests/test_plugins.py, naming the bases to use)."""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import hpcrl
from hpcrl.build import env_spaces, make_actor
from hpcrl.config import from_dict
from hpcrl.core.algorithms import (
    ALGORITHMS,
    BUILT_IN_ALGOS,
    algorithm_capabilities,
    algorithm_type,
    make_algorithm,
)
from hpcrl.core.algorithms.offpolicy import OFF_POLICY_ALGORITHMS, make_offpolicy_algorithm
from hpcrl.core.flat import contiguous_parameters


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
    algo = make_algorithm(make_actor(config, spaces), config.algo)
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
    algo = make_offpolicy_algorithm(config, spaces)
    rng = np.random.default_rng(0)
    size = 64
    obs = torch.as_tensor(rng.normal(size=(size, *spaces.obs_shape)), dtype=torch.float32)
    return algo, hpcrl.ReplayBatch(
        obs=obs, actions=torch.as_tensor(rng.integers(0, 2, size)),
        rewards=torch.ones(size), discounts=torch.full((size,), 0.99),
        next_obs=obs + 0.1, weights=None, indices=np.arange(size))


def test_every_built_in_algorithm_implements_the_one_contract():
    assert set(BUILT_IN_ALGOS) == set(ALGORITHMS) | set(OFF_POLICY_ALGORITHMS)
    for name in BUILT_IN_ALGOS:
        cls = algorithm_type(name)
        assert issubclass(cls, hpcrl.Algorithm) and not inspect.isabstract(cls), name
        assert cls.stat_names, name
        # the arguments hpcrl passes, named as the constructor names them
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        assert params[:len(cls.constructor_args)] == list(cls.constructor_args), name
        assert algorithm_capabilities(name).learns_from == (
            "replay" if name in OFF_POLICY_ALGORITHMS else "rollouts")
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



@pytest.mark.parametrize("name,call", [
    ("FailingPPO", "FailingPPO(actor, config, reducer, on_nonfinite, **algo.kwargs)"),
    ("FailingDQN", "FailingDQN(spaces, config, device, **algo.kwargs)")])
def test_a_plugin_whose_constructor_fails_is_named_with_its_familys_call(name, call,
                                                                           monkeypatch):
    from hpcrl.plugins import PluginError

    tests = Path(__file__).parent
    monkeypatch.syspath_prepend(str(tests / "mpi"))  # the broken components
    monkeypatch.syspath_prepend(str(tests.parent / "examples"))  # what they import
    config = from_dict({}, [f"algo.name=hpcrl_testplugins:{name}"])
    spaces = env_spaces(config)
    with pytest.raises(PluginError) as err:
        if name == "FailingPPO":
            make_algorithm(make_actor(config, spaces), config.algo)
        else:
            make_offpolicy_algorithm(config, spaces)
    assert (f"building it as {call} failed: RuntimeError: lab cluster license not found"
            in str(err.value))
