"""Acting engines: how a collector or an inference rank evaluates a policy, in numpy or in
torch, for every kind of policy hpcrl trains.

A collector asks its policy for actions once per env step, on a few observations. For the
small MLPs of classic control, torch's per-operation dispatch costs more than the
arithmetic, so on the CPU the networks are evaluated in numpy with the same weights
(float32; results agree with torch to rounding, which tests check). An engine holds *views*
of the module's weights, not copies: weights loaded into the module in place are seen at
once, and :meth:`sync` re-takes the views (or copies what must be copied, such as a log
std) after a load that may have re-allocated them. torch serves image encoders, memory
cores and other devices.

One factory, :func:`make_engine`, picks the engine of any policy module: an actor-critic's
(:class:`PolicyEngine`: sampled actions, their log-probs, values and the next recurrent
state, for rollouts) or an off-policy algorithm's acting policy (:data:`OffPolicyEngine`:
greedy Q actions, deterministic actions, or squashed Gaussian samples, for transition
chunks).

A collector asks for a group's actions (``submit`` / ``submit_act``) before it takes them
(``result`` / ``act_result``), so that an engine whose forward runs elsewhere (an inference
rank's) computes one group's actions while the collector steps another group. The engines
here compute at once and hand the answer over when it is taken.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, overload

import numpy as np
import torch
from torch import nn

from hpcrl.models.actor import ActorCritic
from hpcrl.models.continuous_policies import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    DeterministicPolicy,
    SquashedGaussianPolicy,
)
from hpcrl.models.distributions import MultiCategoricalActions
from hpcrl.models.encoders import FormatEncoder
from hpcrl.models.mlp_kernel import forward, layer_views
from hpcrl.models.qnetwork import QNetwork
from hpcrl.numerics.compiling import compiled

_LOG_SQRT_2PI = np.float32(0.5 * math.log(2.0 * math.pi))


Step = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]


class PolicyEngine(Protocol):
    """What the collector needs: sampled actions with log-probs, values and the next
    recurrent state (None for a feedforward actor), and values. ``state`` is the flat
    ``[B, state_size]`` float32 state of a recurrent actor, None otherwise; ``group`` is
    the collector's group of envs the rows belong to."""

    def sync(self) -> None:
        """Pick up the actor's current weights."""
        ...

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> Step:
        """Actions drawn with ``noise``, their log-probs ``[B]``, values ``[B]`` and the next
        recurrent state, for observations ``obs`` ``[B, ...]``."""
        ...

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray,
               state: np.ndarray | None = None) -> None:
        """Ask for :meth:`step` of ``group``'s rows (one request of a group at a time)."""
        ...

    def result(self, group: int) -> Step:
        """The answer to ``group``'s request (valid until its next request)."""
        ...

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """Values ``[B]`` of ``obs`` (what bootstraps a rollout cut short)."""
        ...


class StepsAtOnce:
    """:meth:`PolicyEngine.submit` and :meth:`~PolicyEngine.result` of an engine that
    computes in this process: the step is taken when asked for, kept until taken."""

    _answers: dict[int, Step]
    step: Callable[..., Step]  # the engine's own

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray,
               state: np.ndarray | None = None) -> None:
        """Take the step of ``group``'s rows now."""
        if not hasattr(self, "_answers"):
            self._answers = {}
        self._answers[group] = self.step(obs, noise, state)

    def result(self, group: int) -> Step:
        """The step :meth:`submit` took for ``group``."""
        return self._answers.pop(group)


class ActsAtOnce:
    """``submit_act`` / ``act_result`` of an off-policy engine that computes in this
    process: the actions are chosen when asked for, kept until taken."""

    _acted: dict[int, np.ndarray]
    act: Callable[..., np.ndarray]  # the engine's own

    def submit_act(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None
                   ) -> None:
        """Choose the actions of ``group``'s rows now."""
        if not hasattr(self, "_acted"):
            self._acted = {}
        self._acted[group] = self.act(obs, noise)

    def act_result(self, group: int) -> np.ndarray:
        """The actions :meth:`submit_act` chose for ``group``."""
        return self._acted.pop(group)


class NumpyEngine(StepsAtOnce):
    """The actor's networks evaluated in numpy on the CPU."""

    def __init__(self, actor: ActorCritic) -> None:
        self.actor = actor
        self.sync()

    def sync(self) -> None:
        """Re-take views of the actor's layers (and a copy of its log std) after new weights."""
        a = self.actor
        self.pi = layer_views(a.pi_trunk)
        self.vf = None if a.shared else layer_views(a.vf_trunk)
        self.pi_head, self.vf_head = layer_views(a.pi_head)[0], layer_views(a.vf_head)[0]
        self.log_std = None if a.integer_actions else a.log_std.detach().numpy().copy()
        self.categories = (a.distribution.categories  # several components, or None
                           if isinstance(a.distribution, MultiCategoricalActions) else None)

    def _features(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self.actor.obs_format.encode_numpy(obs)
        pi = forward(self.pi, x)
        return pi, (pi if self.vf is None else forward(self.vf, x))

    def _value(self, features: np.ndarray) -> np.ndarray:
        w, b, _ = self.vf_head
        return (features @ w + b)[:, 0]

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """Values ``[B]`` of ``obs`` (a feedforward actor: ``state`` unused)."""
        return self._value(self._features(obs)[1])

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, None]:
        """Actions, their float32 log-probs and values ``[B]`` of ``obs`` in numpy, drawn with
        ``noise`` as the torch actor draws them; no recurrent state (None)."""
        pi, vf = self._features(obs)
        w, b, _ = self.pi_head
        out = pi @ w + b
        if self.categories is not None:
            parts = np.split(out, np.cumsum(self.categories)[:-1], axis=1)
            sampled = [categorical_sample(p, noise[:, j]) for j, p in enumerate(parts)]
            actions = np.stack([a for a, _ in sampled], axis=1)
            log_probs = np.sum([lp for _, lp in sampled], axis=0)
        elif self.log_std is None:
            actions, log_probs = categorical_sample(out, noise)
        else:
            actions = out + np.exp(self.log_std) * noise
            log_probs = (-0.5 * noise * noise - self.log_std - _LOG_SQRT_2PI).sum(axis=1)
        return actions, log_probs.astype(np.float32), self._value(vf), None


def categorical_sample(logits: np.ndarray, uniforms: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-CDF samples of ``softmax(logits)`` (rows) and their log-probs, as
    :class:`~hpcrl.models.distributions.CategoricalActions` draws them."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    cdf = np.cumsum(e / total, axis=1)
    actions = np.minimum((cdf < uniforms[:, None]).sum(axis=1), logits.shape[1] - 1)
    return actions, z[np.arange(z.shape[0]), actions] - np.log(total[:, 0])


class TorchEngine(StepsAtOnce):
    """The actor itself, for collectors whose actor lives on an accelerator, image encoders
    and memory cores; ``compile``: its step and value under torch.compile (``train.compile``:
    an inference rank's forward, whose batch size varies with the requests it batches)."""

    def __init__(self, actor: ActorCritic, compile: bool = False) -> None:
        self.actor = actor
        self.device = next(actor.parameters()).device
        self._step = compiled(actor.step, self.device, dynamic=True) if compile else actor.step
        self._value = (compiled(actor.value, self.device, dynamic=True) if compile
                       else actor.value)

    def sync(self) -> None:
        """Nothing to do: the engine evaluates the actor itself."""
        pass

    def _state(self, state: np.ndarray | None) -> torch.Tensor | None:
        return None if state is None else torch.from_numpy(state).to(self.device)

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The actor's step on its device under inference mode, results back as numpy arrays."""
        with torch.inference_mode():
            a, logp, v, new = self._step(torch.from_numpy(obs).to(self.device),
                                         torch.from_numpy(noise).to(self.device),
                                         self._state(state))
        return (a.cpu().numpy(), logp.cpu().numpy(), v.cpu().numpy(),
                None if new is None else new.cpu().numpy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """The actor's values ``[B]`` on its device, back as a numpy array."""
        with torch.inference_mode():
            return self._value(torch.from_numpy(obs).to(self.device),
                               self._state(state)).cpu().numpy()


class GreedyQEngine(ActsAtOnce):
    """Argmax-Q actions of a :class:`QNetwork`."""

    def __init__(self, network: QNetwork) -> None:
        self.network = network
        self.sync()

    def sync(self) -> None:
        """Re-take views of the network's layers."""
        self.layers = layer_views(self.network.trunk, self.network.head)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, ``[B, num_actions]``."""
        return forward(self.layers, self.network.obs_format.encode_numpy(obs))

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """The greedy actions ``[B]`` (``noise`` unused)."""
        return self.q_values(obs).argmax(axis=1)


class TorchGreedyQEngine(GreedyQEngine):
    """Argmax-Q actions of a :class:`QNetwork` with an image encoder, evaluated by torch
    (convolutions have no numpy form here; per-step dispatch is small next to them)."""

    def sync(self) -> None:
        """Note the network's device (torch evaluates the module itself: no views to take)."""
        self.device = self.network.head.weight.device

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` ``[B, num_actions]`` by the network on its device, as numpy."""
        with torch.inference_mode():
            return self.network.q_values(torch.from_numpy(obs).to(self.device)).cpu().numpy()


class DeterministicEngine(ActsAtOnce):
    """``tanh(MLP(s))`` of a :class:`~hpcrl.models.continuous_policies.DeterministicPolicy`."""

    def __init__(self, policy: DeterministicPolicy) -> None:
        self.policy = policy
        self.sync()

    def sync(self) -> None:
        """Re-take views of the policy's layers."""
        self.layers = layer_views(self.policy.trunk, self.policy.head)

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """The policy's actions ``[B, A]`` in ``[-1, 1]`` (exploration noise is added by the
        collector; ``noise`` unused)."""
        return np.tanh(forward(self.layers, self.policy.obs_format.encode_numpy(obs)))


class SquashedGaussianEngine(ActsAtOnce):
    """Samples ``tanh(mean + std * noise)`` of a :class:`SquashedGaussianPolicy`."""

    def __init__(self, policy: SquashedGaussianPolicy) -> None:
        self.policy = policy
        self.sync()

    def sync(self) -> None:
        """Re-take views of the trunk's and both heads' layers."""
        p = self.policy
        self.trunk = layer_views(p.trunk)
        self.mean = layer_views(p.mean_head)
        self.log_std = layer_views(p.log_std_head)

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """``tanh(mean + std x noise)`` ``[B, A]`` for standard normals ``noise``; ``tanh(mean)``
        without noise (evaluation)."""
        h = forward(self.trunk, self.policy.obs_format.encode_numpy(obs))
        mean = forward(self.mean, h)
        if noise is None:
            return np.tanh(mean)
        log_std = np.clip(forward(self.log_std, h), LOG_STD_MIN, LOG_STD_MAX)
        return np.tanh(mean + np.exp(log_std) * noise)


OffPolicyEngine = GreedyQEngine | DeterministicEngine | SquashedGaussianEngine


# an ActorCritic is an nn.Module too: the first overload is the more specific, as at run time
@overload
def make_engine(module: ActorCritic,  # type: ignore[overload-overlap]
                compile: bool = False) -> PolicyEngine:
    """An actor-critic's engine: rollouts' actions, log-probs, values and states."""


@overload
def make_engine(module: nn.Module, compile: bool = False) -> OffPolicyEngine:
    """An off-policy acting policy's engine: actions for transition chunks."""


def make_engine(module: nn.Module, compile: bool = False) -> PolicyEngine | OffPolicyEngine:
    """The engine that evaluates ``module``: an actor-critic in numpy when it is a
    feedforward MLP on the CPU, else by torch (compiled when ``compile``: an inference
    rank's under ``train.compile``); an off-policy acting policy (Q-network, squashed
    Gaussian or deterministic policy) in numpy, a Q-network with an image encoder by
    torch."""
    if isinstance(module, ActorCritic):
        on_cpu = next(module.parameters()).device.type == "cpu"
        if on_cpu and isinstance(module.pi_encoder, FormatEncoder) and not module.recurrent:
            return NumpyEngine(module)
        return TorchEngine(module, compile)
    if isinstance(module, QNetwork):
        if isinstance(module.encoder, FormatEncoder):
            return GreedyQEngine(module)
        return TorchGreedyQEngine(module)
    if isinstance(module, SquashedGaussianPolicy):
        return SquashedGaussianEngine(module)
    if isinstance(module, DeterministicPolicy):
        return DeterministicEngine(module)
    raise TypeError(f"no acting engine for a policy {type(module).__name__}")
