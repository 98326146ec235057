"""The contracts a component meets, built-in or yours.

hpcrl's own components are written against these same interfaces, and a plug-in named in a
config (``module:Name``) is checked against them before any rank starts work:

- :class:`Network` (``actor.network``): an encoder of observations into features. The actor
  puts the memory core (``actor.memory``), the MLP trunk and the heads after it.
- :class:`~hpcrl.algorithms.algorithm.Algorithm` (``algo.name``): a learning rule of
  either family. It turns batches into gradients (``compute_gradients``, through its
  ``loss``) and applies them (``apply_gradients``): the split that lets gradient workers and
  updaters live on different ranks; it declares its ``capabilities`` and publishes its
  ``policy``. An on-policy one derives from ``hpcrl.PPO``, ``hpcrl.A2C``, ``hpcrl.IMPALA``
  or ``hpcrl.OnPolicyAlgorithm``; an off-policy one from ``hpcrl.DQN``, ``hpcrl.SAC``,
  ``hpcrl.TD3``, ``hpcrl.DDPG``, ``hpcrl.MPO`` or ``hpcrl.OffPolicyAlgorithm``.
  An on-policy algorithm's ``storage`` says what batches it trains on: ``"gae"``
  (rollouts with GAE advantages and returns,
  :class:`~hpcrl.buffers.rollout_storage.RolloutBatch`, or
  :class:`~hpcrl.buffers.rollout_storage.RecurrentBatch` for a recurrent actor) or ``"vtrace"``
  (whole sequences for V-trace, :class:`~hpcrl.buffers.vtrace_storage.SequenceBatch`).
  ``stat_names`` names the loss terms ``loss`` reports; ``state_dict``/``load_state_dict``
  hold what a checkpoint must (call the base's to keep the optimiser).
- :class:`Actor`: what algorithms, collectors and evaluation call on the agent's networks
  (:class:`~hpcrl.models.actor.ActorCritic` is the implementation).
- acting engines: an algorithm's acting policy (its ``acting_policy``) declares how
  collectors and inference ranks act with it, ``acting_engine(compile=False, envs=None)``,
  returning an :class:`~hpcrl.models.acting.Engine`, one protocol for every policy:
  ``step(obs, noise, state)`` gives a :class:`~hpcrl.models.acting.Step` (the actions, and
  the log-probs, values and next recurrent state where the policy has them, None where it
  has not), ``submit``/``result`` ask for a group's step and take it, ``reset`` and
  ``state_dict``/``load_state_dict`` keep what it carries between steps (nothing, for most).
  :class:`~hpcrl.models.acting.ValueEngine` adds an actor-critic's ``value``,
  :class:`~hpcrl.models.acting.QValueEngine` a Q-network's ``q_values``;
  :class:`~hpcrl.models.acting.ComputesHere` gives an engine that computes in this process
  all but ``sync`` and ``step``. An engine of the older off-policy form (``act``,
  ``submit_act``/``act_result``) is wrapped by ``make_engine`` and keeps working.
- :class:`Storage`: how a gradient worker holds an update's rollouts and cuts minibatches.
- env wrappers (``env.wrappers``): ``Class(env, **kwargs)`` returning a ``gymnasium.Env``,
  usually a ``gymnasium.Wrapper``; the evaluation envs get the same wrappers.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from hpcrl.components.import_paths import CONTRACTS, PluginError, component_factory, failure
from hpcrl.errors import ExplainedError

NETWORK_CALL = "Class(observation_space, **actor.network_kwargs)"


@runtime_checkable
class Network(Protocol):
    """An encoder: ``Class(observation_space, **actor.network_kwargs)``, an ``nn.Module``.

    ``features`` is the width of its output; ``forward`` maps a batch of observations
    ``[B, *shape]`` (a tensor in the env's dtype, float32 after normalisation when
    ``env.normalize_obs``; uint8 frames stay uint8) to ``[B, features]`` float features.
    """

    features: int

    def __call__(self, obs: torch.Tensor) -> torch.Tensor: ...


class Actor(Protocol):
    """The agent's networks as algorithms, collectors and evaluation use them."""

    recurrent: bool
    state_size: int

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, state_size]``: the recurrent state at an episode's start."""
        ...

    def step(self, obs: torch.Tensor, noise: torch.Tensor, state: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Actions sampled with ``noise``, their log-probs, values, and the next state."""
        ...

    def value(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """Values ``[B]``."""
        ...

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs of ``actions``, entropies and values (a feedforward actor)."""
        ...

    def evaluate_sequences(self, obs: torch.Tensor, actions: torch.Tensor,
                           state: torch.Tensor, starts: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The same ``[T, B]`` for sequences from their start states (a recurrent actor)."""
        ...


class Storage(Protocol):
    """A gradient worker's hold on one update's rollouts."""

    def load(self, rollouts: Sequence[Any]) -> None:
        """Take the rollouts of this update."""
        ...

    def minibatches(self, num_minibatches: int, seed: int, total_envs: int) -> Iterator[Any]:
        """One epoch of minibatches, in an order drawn over the job's ``total_envs``."""
        ...

    def full_batch(self) -> Any:
        """Every sample of the update."""
        ...


def _observation_batch(space: gym.spaces.Box) -> torch.Tensor:
    """Two observations of ``space`` as a network receives them."""
    dtype = np.float32 if np.issubdtype(space.dtype, np.floating) else space.dtype
    sample = np.stack([space.sample(), space.sample()])
    return torch.from_numpy(np.nan_to_num(sample).astype(dtype))


def network_factory(path: str) -> Any:
    """What ``actor.network`` names, checked before it is called: a ``torch.nn.Module``
    class (or a function) that takes the observation space as its first argument."""
    return component_factory(path, "actor.network", nn.Module,
                             "a torch.nn.Module subclass with an int attribute 'features' "
                             "and forward(obs) -> [B, features]", NETWORK_CALL)


def make_network(path: str, kwargs: dict[str, Any], space: gym.Space | None) -> nn.Module:
    """The network at ``path`` built for ``space`` and checked against :class:`Network`:
    a module, an int ``features``, and ``[2, features]`` float features for a batch of
    two observations. Its constructor's own error is refused naming the class."""
    if not isinstance(space, gym.spaces.Box):
        raise PluginError(f"config key 'actor.network' ({path}): a network of your own takes "
                          f"Box observations, and this env observes {space}; wrap the env "
                          f"(env.wrappers, e.g. gymnasium.wrappers:FlattenObservation)")
    factory = network_factory(path)
    try:
        net = factory(space, **kwargs)
    except ExplainedError:
        raise
    except Exception as err:  # the user's constructor may fail in any way
        raise PluginError(f"config key 'actor.network' ({path}): building it as "
                          f"{NETWORK_CALL} failed: {failure(err)}") from None
    if not isinstance(net, nn.Module):
        raise PluginError(f"config key 'actor.network' ({path}): it built a "
                          f"{type(net).__name__}, not a torch.nn.Module ({CONTRACTS})")
    features = getattr(net, "features", None)
    if not isinstance(features, int) or isinstance(features, bool) or features <= 0:
        raise PluginError(f"config key 'actor.network' ({path}): the module needs an int "
                          f"attribute 'features' > 0, the width of its output (got "
                          f"{features!r}) ({CONTRACTS})")
    with torch.no_grad():
        try:
            out = net(_observation_batch(space))
        except Exception as err:
            raise PluginError(f"config key 'actor.network' ({path}): its forward failed on a "
                              f"batch [2, {', '.join(map(str, space.shape))}] of "
                              f"{space.dtype} observations: {failure(err)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, features) \
            or not out.is_floating_point():
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise PluginError(f"config key 'actor.network' ({path}): forward must return float "
                          f"features [B, features] = [2, {features}] for a batch of 2, got "
                          f"{got} ({CONTRACTS})")
    return net
