"""The engines of an actor-critic (:class:`~hpcrl.models.actor.ActorCritic`), which it
declares as its acting engine: its networks in numpy on the CPU (:class:`NumpyEngine`, a
feedforward MLP actor), or the actor itself by torch (:class:`TorchEngine`: image encoders,
memory cores, accelerators; compiled on an inference rank under ``train.compile``). Both
step into rollouts' sampled actions, their log-probs, values and the next recurrent state,
and give values (:class:`~hpcrl.models.acting.ValueEngine`).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from hpcrl.models.acting import ComputesHere, Step, needs_noise
from hpcrl.models.distributions import ILLEGAL_LOGIT, MultiCategoricalActions
from hpcrl.models.mlp_kernel import forward, forward_pair, layer_views, paired
from hpcrl.numerics.compiling import compiled

if TYPE_CHECKING:  # annotations only: the actor imports its engines
    from hpcrl.models.actor import ActorCritic

_LOG_SQRT_2PI = np.float32(0.5 * math.log(2.0 * math.pi))


class NumpyEngine(ComputesHere):
    """The actor's networks evaluated in numpy on the CPU. With :attr:`rows_alone` (a
    deterministic job's, ``train.deterministic``) every row of a forward is computed on its
    own (:func:`~hpcrl.models.mlp_kernel.rows_alone`), so an env's actions, log-probs and
    values do not depend on the rows beside it: the same on one collector of 8 envs as on
    two of 4, in a group of 2 as in an inference rank's batch of 16."""

    rows_alone = False  # make_engine(..., rows_alone=True) sets it

    def __init__(self, actor: ActorCritic) -> None:
        self.actor = actor
        self.sync()

    def sync(self) -> None:
        """Re-take views of the actor's layers after new weights (and copies of its log std
        and of its policy and value networks stacked, :func:`~hpcrl.models.mlp_kernel.paired`:
        half the numpy calls of running them apart)."""
        a = self.actor
        self.trunk = layer_views(a.pi_trunk)  # the policy's, or both heads' when shared
        self.pi_head, self.vf_head = layer_views(a.pi_head)[0], layer_views(a.vf_head)[0]
        self.actions_width = self.pi_head[0].shape[1]
        self.pair = None if a.shared else paired(self.trunk + [self.pi_head],
                                                 layer_views(a.vf_trunk, a.vf_head))
        self.log_std = None if a.integer_actions else a.log_std.detach().numpy().copy()
        self.categories = (a.distribution.categories  # several components, or None
                           if isinstance(a.distribution, MultiCategoricalActions) else None)

    def _heads(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The policy head's output ``[B, outputs]`` and the extrinsic values ``[B]`` of
        ``obs``."""
        x = self.actor.obs_format.encode_numpy(obs)
        alone = self.rows_alone
        if self.pair is not None:
            out, values = forward_pair(self.pair, x, alone=alone)
            return self._legal(out[:, :self.actions_width], obs), values[:, 0]
        features = forward(self.trunk, x, alone=alone)  # a shared trunk
        return (self._legal(forward([self.pi_head], features, alone=alone), obs),
                forward([self.vf_head], features, alone=alone)[:, 0])

    def _legal(self, logits: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """``logits`` with illegal moves at :data:`ILLEGAL_LOGIT` (``actor.action_mask``:
        the observations' last values are the legal moves), as the torch actor masks them."""
        size = self.actor.mask_size
        if not size:
            return logits
        legal = np.asarray(obs).reshape(len(logits), -1)[:, -size:] > 0.5
        return np.where(legal, logits, np.float32(ILLEGAL_LOGIT)).astype(logits.dtype)

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """Values ``[B]`` of ``obs`` (a feedforward actor: ``state`` unused)."""
        return self._heads(obs)[1]

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """Actions, their float32 log-probs and values ``[B]`` of ``obs`` in numpy, drawn with
        ``noise`` as the torch actor draws them; no recurrent state (None)."""
        noise = needs_noise(noise)
        out, values = self._heads(obs)
        if self.categories is not None:
            parts = np.split(out, np.cumsum(self.categories)[:-1], axis=1)
            sampled = [categorical_sample(p, noise[:, j]) for j, p in enumerate(parts)]
            actions = np.stack([a for a, _ in sampled], axis=1)
            log_probs = np.sum([lp for _, lp in sampled], axis=0)
        elif self.log_std is None:
            actions, log_probs = categorical_sample(out, noise)
            if self.actor.mask_size:  # never past the last legal move (the torch actor's rule)
                last = (out.shape[1] - 1
                        - np.argmax((out > ILLEGAL_LOGIT / 2)[:, ::-1], axis=1))
                past = actions > last
                if past.any():
                    actions = np.minimum(actions, last)
                    z = out - out.max(axis=1, keepdims=True)
                    log_probs = (z[np.arange(len(z)), actions]
                                 - np.log(np.exp(z).sum(axis=1)))
        else:
            actions = out + np.exp(self.log_std) * noise
            log_probs = (-0.5 * noise * noise - self.log_std - _LOG_SQRT_2PI).sum(axis=1)
        return Step(actions, log_probs.astype(np.float32), values, None)


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


class TorchEngine(ComputesHere):
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

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The actor's step on its device under inference mode, results back as numpy arrays."""
        with torch.inference_mode():
            a, logp, v, new = self._step(torch.from_numpy(obs).to(self.device),
                                         torch.from_numpy(needs_noise(noise)).to(self.device),
                                         self._state(state))
        return Step(a.cpu().numpy(), logp.cpu().numpy(), v.cpu().numpy(),
                    None if new is None else new.cpu().numpy())

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """The actor's values ``[B]`` on its device, back as a numpy array."""
        with torch.inference_mode():
            return self._value(torch.from_numpy(obs).to(self.device),
                               self._state(state)).cpu().numpy()
