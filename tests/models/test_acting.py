"""Acting engines are declared by the policy's class: ``make_engine`` builds the engine a
module's class declares (``acting_engine``), a plug-in's policy class included, and the
off-policy collector acts through it; a module that declares none is refused by name. Every
engine meets the one protocol (``Engine``: step, submit/result, reset, state_dict), and a
plug-in engine of the older off-policy form (act, submit_act/act_result) meets it through
the adapter ``make_engine`` wraps it in."""
import numpy as np
import pytest
import torch
from torch import nn

from hpcrl.algorithms import make_policy
from hpcrl.build import env_spaces
from hpcrl.collection.collector import transition_collector
from hpcrl.collection.transition_filler import TransitionSections, chunk_layout
from hpcrl.config import from_dict
from hpcrl.envs.vector import make_vector_env
from hpcrl.models.acting import (
    ActedEnvs,
    ActsAdapter,
    ActsAtOnce,
    ComputesHere,
    Step,
    make_engine,
)
from hpcrl.models.actor_engines import NumpyEngine
from hpcrl.models.continuous_policies import DeterministicEngine, DeterministicPolicy

STEPS = 20


class HalfEngine(ActsAtOnce):
    """A plug-in's engine of the older off-policy form: half of the deterministic action,
    counting its calls."""

    def __init__(self, policy: "HalvedPolicy") -> None:
        self.inner = DeterministicEngine(policy)
        self.calls = 0

    def sync(self) -> None:
        """Re-take the inner engine's views."""
        self.inner.sync()

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """Half the policy's ``tanh(MLP(s))``."""
        self.calls += 1
        return 0.5 * self.inner.step(obs, noise).actions


class HalvedPolicy(DeterministicPolicy):
    """A plug-in policy class that declares its own engine."""

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> HalfEngine:
        """Act through :class:`HalfEngine`."""
        self.engine = HalfEngine(self)
        return self.engine


class ThirdEngine(ComputesHere):
    """A plug-in's engine of the one protocol: a third of the deterministic action."""

    def __init__(self, policy: DeterministicPolicy) -> None:
        self.inner = DeterministicEngine(policy)

    def sync(self) -> None:
        """Re-take the inner engine's views."""
        self.inner.sync()

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """A third of the policy's ``tanh(MLP(s))``."""
        return Step(self.inner.step(obs, noise).actions / 3)


class ThirdPolicy(DeterministicPolicy):
    """A plug-in policy class that declares an engine of the one protocol."""

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> ThirdEngine:
        """Act through :class:`ThirdEngine`."""
        return ThirdEngine(self)


def td3_config(*extra: str):
    """TD3 on Pendulum with no action noise and no warm-up: the stored actions are the
    engine's own."""
    return from_dict({}, ["algo.name=td3", "env.id=Pendulum-v1", "replay.learning_starts=0",
                          "algo.td3.action_noise=none", f"replay.train_freq={STEPS}",
                          f"algo.num_steps={STEPS}", "actor.hidden_sizes=[8]", *extra])


def test_make_engine_builds_what_the_class_declares():
    cfg = td3_config()
    spaces = env_spaces(cfg)
    built = make_policy(cfg, spaces)
    policy = HalvedPolicy(spaces.obs_shape, spaces.action_space, cfg.actor, spaces.obs_format)
    policy.load_state_dict(built.state_dict())
    third = ThirdPolicy(spaces.obs_shape, spaces.action_space, cfg.actor, spaces.obs_format)
    third.load_state_dict(built.state_dict())
    engine = make_engine(third)
    assert isinstance(engine, ThirdEngine)  # an engine of the one protocol, as it is
    obs = np.random.default_rng(0).standard_normal((3, *spaces.obs_shape)).astype(np.float32)
    engine.submit(0, obs)
    np.testing.assert_allclose(engine.result(0).actions,
                               make_engine(built).step(obs).actions / 3, rtol=1e-6)
    # the built-ins declare theirs the same way: a feedforward actor-critic acts in numpy
    actor = make_policy(from_dict({}, ["algo.name=ppo", "actor.hidden_sizes=[8]"]),
                        env_spaces(from_dict({}, [])))
    assert isinstance(make_engine(actor), NumpyEngine)


def test_the_collector_acts_through_a_plugin_policys_declared_engine():
    cfg = td3_config()
    spaces = env_spaces(cfg)
    policy = HalvedPolicy(spaces.obs_shape, spaces.action_space, cfg.actor, spaces.obs_format)
    envs = make_vector_env(cfg.env, 1)
    sections = TransitionSections(cfg.env, cfg.replay, cfg.algo, cfg.train, cfg.seed)
    collector = transition_collector(envs, policy, sections)
    layout = chunk_layout(cfg.replay, cfg.algo, spaces.obs_shape, spaces.action_shape, 1)
    chunk = collector.collect(layout.new(), STEPS, job_env_steps=0)
    envs.close()
    k = chunk.count
    assert k == STEPS and policy.engine.calls == STEPS
    expected = 0.5 * DeterministicEngine(policy).step(chunk.obs[:k]).actions
    # the collector acts one observation row at a time, the check on all rows at once: a
    # float32 matmul of another batch size may round the last bit differently (3e-8 here)
    np.testing.assert_allclose(chunk.actions[:k], expected, rtol=1e-5, atol=1e-7)


def test_a_module_that_declares_no_engine_is_refused_by_name():
    class Bare(nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs

    with pytest.raises(TypeError, match="Bare declares no acting engine.*acting_engine"):
        make_engine(Bare())


def test_an_engine_of_the_older_off_policy_form_acts_through_the_adapter():
    """A plug-in engine with act / submit_act / act_result (and ActsAtOnce's reset and
    checkpoint) comes out of make_engine as an Engine: steps of its actions alone, its
    requests by group, its carry-nothing reset and checkpoint."""
    cfg = td3_config()
    spaces = env_spaces(cfg)
    policy = HalvedPolicy(spaces.obs_shape, spaces.action_space, cfg.actor, spaces.obs_format)
    engine = make_engine(policy)
    assert isinstance(engine, ActsAdapter) and engine.inner is policy.engine
    obs = np.random.default_rng(0).standard_normal((3, *spaces.obs_shape)).astype(np.float32)
    expected = 0.5 * DeterministicEngine(policy).step(obs).actions
    step = engine.step(obs)
    assert step.log_probs is None and step.values is None and step.state is None
    np.testing.assert_array_equal(step.actions, expected)
    engine.submit(1, obs)
    np.testing.assert_array_equal(engine.result(1).actions, expected)
    assert policy.engine.calls == 2
    engine.reset(np.ones(3, bool))
    engine.load_state_dict(engine.state_dict())
    assert engine.state_dict() == {}


def test_every_built_in_engine_meets_the_one_protocol():
    """An actor-critic's engine steps into actions, log-probs and values and gives values;
    an off-policy policy's into actions alone; both ask by group and checkpoint alike."""
    obs = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    actor = make_policy(from_dict({}, ["algo.name=ppo", "env.id=Pendulum-v1",
                                       "actor.hidden_sizes=[8]"]),
                        env_spaces(from_dict({}, ["env.id=Pendulum-v1"])))
    cfg = td3_config()
    policy = make_policy(cfg, env_spaces(cfg))
    noise = np.zeros((4, 1), np.float32)
    for engine, scored in ((make_engine(actor), True), (make_engine(policy), False)):
        step = engine.step(obs, noise)
        assert (step.log_probs is not None, step.values is not None) == (scored, scored)
        engine.submit(0, obs, noise)
        for got, want in zip(engine.result(0), step, strict=True):
            assert (got is None and want is None) or np.array_equal(got, want)
        engine.reset(np.zeros(4, bool))
        engine.load_state_dict(engine.state_dict())
    np.testing.assert_array_equal(make_engine(actor).value(obs), step_values(actor, obs))


def step_values(actor: nn.Module, obs: np.ndarray) -> np.ndarray:
    """The values of the actor-critic's engine's step: what its ``value`` gives too."""
    values = make_engine(actor).step(obs, np.zeros((len(obs), 1), np.float32)).values
    assert values is not None
    return values
