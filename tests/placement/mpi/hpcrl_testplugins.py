"""Components that break their contracts, named in configs as ``hpcrl_testplugins:Name``
(tests/placement/mpi is on PYTHONPATH); the working ones the tests train are the README's example,
``examples/custom_components.py`` (examples/ is on PYTHONPATH too)."""
from __future__ import annotations

import gymnasium as gym
from custom_components import SquashEncoder
from torch import nn

import hpcrl


# broken components, for the refusal tests
class NotAnAlgorithm:
    pass


class ContractOnly(hpcrl.Algorithm):
    """Derives from the contract both families implement, but from neither family's base."""

    stat_names = ("x",)


class NoLoss(hpcrl.OnPolicyAlgorithm):
    stat_names = ("x",)

    def minibatches(self, storage, update, seed, total_envs, count):
        yield storage.full_batch()

    def steps_per_update(self, count):
        return 1


class NoTargetUpdates(hpcrl.OffPolicyAlgorithm):
    """An off-policy algorithm that forgot update_targets."""

    stat_names = ("q_loss",)
    capabilities = hpcrl.DQN.capabilities

    def build(self):
        return []

    @classmethod
    def acting_policy(cls, spaces, actor):
        return nn.Identity()

    @property
    def policy(self):
        return nn.Identity()

    def loss(self, batch):
        raise AssertionError("never trained")

    def stepping(self, step):
        return []


class NoOffPolicyStats(hpcrl.DQN):
    stat_names = ()


class NoFeatures(nn.Module):
    def __init__(self, observation_space) -> None:
        super().__init__()

    def forward(self, obs):
        return obs


class WrongWidth(SquashEncoder):
    def forward(self, obs):
        return super().forward(obs)[:, :3]


def not_a_wrapper(env):
    return "an env"


class Helpless(gym.Wrapper):
    def __init__(self, env, *, required):
        super().__init__(env)


class ImportsAMissingModule:
    pass


class FailingPPO(hpcrl.PPO):
    """A PPO whose constructor fails, as a user's may."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("lab cluster license not found")


class FailingDQN(hpcrl.DQN):
    """A DQN whose constructor fails, as a user's may."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("lab cluster license not found")


class OldSignaturePPO(hpcrl.PPO):
    """A plug-in written for the on-policy constructor of before."""

    def __init__(self, actor, config, reducer=None, on_nonfinite="stop", *, scale=1.0):
        super().__init__(actor, config, reducer)


class OldSignatureDQN(hpcrl.DQN):
    """A plug-in written for the off-policy constructor of before."""

    def __init__(self, spaces, config, device="cpu", *, scale=1.0):
        super().__init__(spaces, config, device)


class WholeConfigDQN(hpcrl.DQN):
    """A plug-in written for the constructor that passed the whole config."""

    def __init__(self, spaces, config, device="cpu", reducer=None, *, scale=1.0):
        super().__init__(spaces, config, device, reducer)
