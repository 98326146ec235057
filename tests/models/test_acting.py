"""Acting engines are declared by the policy's class: ``make_engine`` builds the engine a
module's class declares (``acting_engine``), a plug-in's policy class included, and the
off-policy collector acts through it; a module that declares none is refused by name."""
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
from hpcrl.models.acting import ActedEnvs, ActsAtOnce, make_engine
from hpcrl.models.actor_engines import NumpyEngine
from hpcrl.models.continuous_policies import DeterministicEngine, DeterministicPolicy

STEPS = 20


class HalfEngine(ActsAtOnce):
    """A plug-in's engine: half of the deterministic action, counting its calls."""

    def __init__(self, policy: "HalvedPolicy") -> None:
        self.inner = DeterministicEngine(policy)
        self.calls = 0

    def sync(self) -> None:
        """Re-take the inner engine's views."""
        self.inner.sync()

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """Half the policy's ``tanh(MLP(s))``."""
        self.calls += 1
        return 0.5 * self.inner.act(obs, noise)


class HalvedPolicy(DeterministicPolicy):
    """A plug-in policy class that declares its own engine."""

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> HalfEngine:
        """Act through :class:`HalfEngine`."""
        self.engine = HalfEngine(self)
        return self.engine


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
    engine = make_engine(policy)
    assert isinstance(engine, HalfEngine)
    obs = np.random.default_rng(0).standard_normal((3, *spaces.obs_shape)).astype(np.float32)
    engine.submit_act(0, obs)
    np.testing.assert_allclose(engine.act_result(0), 0.5 * make_engine(built).act(obs),
                               rtol=1e-6)
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
    expected = 0.5 * DeterministicEngine(policy).act(chunk.obs[:k])
    # the collector acts one observation row at a time, the check on all rows at once: a
    # float32 matmul of another batch size may round the last bit differently (3e-8 here)
    np.testing.assert_allclose(chunk.actions[:k], expected, rtol=1e-5, atol=1e-7)


def test_a_module_that_declares_no_engine_is_refused_by_name():
    class Bare(nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs

    with pytest.raises(TypeError, match="Bare declares no acting engine.*acting_engine"):
        make_engine(Bare())
