"""Fast action selection for collectors, in numpy or in torch.

A collector asks its policy for actions once per env step, on a few observations. For the
small MLPs of classic control, torch's per-operation dispatch costs more than the arithmetic,
so on the CPU the networks are evaluated in numpy with the same weights (float32; results
agree with torch to rounding, which tests check). The torch engine serves other devices.
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import torch

from hpcrl.core.actor import ActorCritic
from hpcrl.core.distributions import MultiCategoricalActions
from hpcrl.core.encoders import FormatEncoder
from hpcrl.core.mlp_kernel import forward, layer_views

_LOG_SQRT_2PI = np.float32(0.5 * math.log(2.0 * math.pi))


class PolicyEngine(Protocol):
    """What the collector needs: sampled actions with log-probs, values and the next
    recurrent state (None for a feedforward actor), and values. ``state`` is the flat
    ``[B, state_size]`` float32 state of a recurrent actor, None otherwise."""

    def sync(self) -> None:
        """Pick up the actor's current weights."""
        ...

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Actions drawn with ``noise``, their log-probs ``[B]``, values ``[B]`` and the next
        recurrent state, for observations ``obs`` ``[B, ...]``."""

    def value(self, obs: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """Values ``[B]`` of ``obs`` (what bootstraps a rollout cut short)."""


class NumpyEngine:
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

    def value(self, obs: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
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
    :class:`~hpcrl.core.distributions.CategoricalActions` draws them."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    cdf = np.cumsum(e / total, axis=1)
    actions = np.minimum((cdf < uniforms[:, None]).sum(axis=1), logits.shape[1] - 1)
    return actions, z[np.arange(z.shape[0]), actions] - np.log(total[:, 0])


class TorchEngine:
    """The actor itself, for collectors whose actor lives on an accelerator."""

    def __init__(self, actor: ActorCritic) -> None:
        self.actor = actor
        self.device = next(actor.parameters()).device

    def sync(self) -> None:
        """Nothing to do: the engine evaluates the actor itself."""
        pass

    def _state(self, state: np.ndarray | None) -> torch.Tensor | None:
        return None if state is None else torch.from_numpy(state).to(self.device)

    def step(self, obs: np.ndarray, noise: np.ndarray, state: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The actor's step on its device under inference mode, results back as numpy arrays."""
        with torch.inference_mode():
            a, logp, v, new = self.actor.step(torch.from_numpy(obs).to(self.device),
                                              torch.from_numpy(noise).to(self.device),
                                              self._state(state))
        return (a.cpu().numpy(), logp.cpu().numpy(), v.cpu().numpy(),
                None if new is None else new.cpu().numpy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """The actor's values ``[B]`` on its device, back as a numpy array."""
        with torch.inference_mode():
            return self.actor.value(torch.from_numpy(obs).to(self.device),
                                    self._state(state)).cpu().numpy()


def make_engine(actor: ActorCritic) -> PolicyEngine:
    """numpy for feedforward MLP actors on the CPU; torch for image encoders, memory cores
    and other devices."""
    on_cpu = next(actor.parameters()).device.type == "cpu"
    if on_cpu and isinstance(actor.pi_encoder, FormatEncoder) and not actor.recurrent:
        return NumpyEngine(actor)
    return TorchEngine(actor)
