"""Actor-critic: encoder, memory core, MLP trunk and heads of an on-policy agent.

Calling the module on raw observations returns deterministic actions, so a trained actor
is usable outside hpcrl as it is (``hpcrl.load_policy``); a recurrent one takes and returns
its state as well. Training code works on observations that the collector already
normalised, through :meth:`ActorCritic.evaluate` (or :meth:`ActorCritic.evaluate_sequences`
for a recurrent actor, over whole sequences from their stored start states).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
import torch
from torch import nn

from hpcrl.components.contracts import make_network
from hpcrl.envs.obs_format import ObsInput
from hpcrl.envs.vector import EnvSpaces
from hpcrl.errors import ConfigError
from hpcrl.models.acting import ActedEnvs
from hpcrl.models.actor_engines import NumpyEngine, TorchEngine
from hpcrl.models.distributions import ILLEGAL_LOGIT, make_distribution
from hpcrl.models.encoders import (
    FormatEncoder,
    features_of,
    make_encoder,
    orthogonal_init,
    reset_fixup,
)
from hpcrl.models.memory import MemoryCore
from hpcrl.models.mlp_kernel import run_mlp, run_mlps
from hpcrl.models.rnd import RandomNetworkDistillation
from hpcrl.numerics.flat import contiguous_parameters
from hpcrl.numerics.normalization import RunningMoments
from hpcrl.numerics.precision import compute_dtype
from hpcrl.sections.rnd_section import RndConfig
from hpcrl.sections.schema import ActorConfig

M = TypeVar("M", bound=nn.Module)  # a module moved by actor_on keeps its type

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(sizes: list[int], activation: str) -> nn.Sequential:
    """Linear layers of the given widths with an activation after each."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(n_in, n_out), _ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


class ActorOutputs(NamedTuple):
    """What the loss reads of an actor's evaluation of stored samples: log-probs of their
    actions, entropies, values (of every head), the distribution parameters and the
    predictor heads' outputs ``[..., k]`` (None when not asked for, or there are none)."""

    log_probs: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor
    params: torch.Tensor
    predictions: torch.Tensor | None

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> ActorOutputs:
        """``fn`` applied to every field that is there (reshaping them all alike)."""
        return ActorOutputs(fn(self.log_probs), fn(self.entropy), fn(self.values),
                            fn(self.params),
                            None if self.predictions is None else fn(self.predictions))


class ActorCritic(nn.Module):
    """Policy and value networks over observations encoded by the env's ``ObsFormat``.

    ``shared_trunk`` feeds both heads from one MLP (and one memory core); otherwise policy
    and value have their own. With ``memory`` (``gru``, ``lstm``) a recurrent core sits
    between the encoder and the trunk; its state is one flat row per env
    (:attr:`state_size` floats, zero at an episode's start).
    Discrete action spaces use a Categorical over logits (MultiDiscrete and MultiBinary one
    per component), Box spaces a diagonal Gaussian with
    a state-independent learned log std. Observation statistics (``obs_rms``) and return
    statistics (``ret_rms``, for reward scaling) are buffers, so they are saved and published
    with the weights. ``predictors`` (the policy-loss add-ons' ``reward``, ``return``) get
    one output column each of a linear head on the policy trunk's features, which only the
    loss evaluates (:meth:`evaluate_outputs`).
    """

    # declared so that torch's ``Module.__getattr__`` (Tensor | Module) does not type them
    pi_core: MemoryCore | None
    vf_core: MemoryCore | None
    rnd: RandomNetworkDistillation | None
    predictor_head: nn.Linear | None

    def __init__(self, spaces: EnvSpaces, config: ActorConfig, normalize_obs: bool = False,
                 clip_obs: float = 10.0, rnd: RndConfig | None = None,
                 predictors: Sequence[str] = ()) -> None:
        super().__init__()
        self.obs_format = spaces.obs_format
        self.obs_shape = spaces.obs_shape
        self.discrete = spaces.discrete
        self.integer_actions = spaces.integer_actions  # logits, no log std
        self.normalize_obs = normalize_obs
        self.clip_obs = clip_obs
        self.obs_rms = RunningMoments(spaces.obs_shape)
        self.ret_rms = RunningMoments(())
        # the parts in the order their weights are made (a seeded actor's weights and its
        # state_dict's keys depend on it): distribution's log std, encoders, memory cores,
        # trunks and heads, RND, predictor head
        n_out = self._make_distribution(spaces, config)
        # actor.action_mask: the observation's last mask_size values are the legal moves
        self.mask_size = n_out if config.action_mask else 0
        if config.action_mask and (not spaces.discrete or len(spaces.obs_shape) != 1):
            raise ConfigError(f"config key 'actor.action_mask' reads the legal moves of one "
                             f"Discrete action from the end of a flat observation; this env "
                             f"has action space {spaces.action_space} and observations of "
                             f"shape {spaces.obs_shape}: set actor.action_mask=false")
        self.shared = config.shared_trunk
        features = self._make_encoders(spaces, config)
        features = self._make_cores(config, features)
        width = self._make_trunks_and_heads(config, features, n_out, rnd)
        if config.ortho_init:
            self._orthogonal_init()
        # value_heads is 2 exactly when rnd is given and enabled
        self.rnd = (RandomNetworkDistillation(self.obs_format, rnd)
                    if rnd is not None and self.value_heads == 2 else None)
        self._make_predictor_head(predictors, width, config.ortho_init)

    def _make_distribution(self, spaces: EnvSpaces, config: ActorConfig) -> int:
        """The action distribution (and a Box's learned log std); the policy head's width."""
        categories = spaces.categories
        if categories is not None:
            self.distribution = make_distribution(categories, spaces.discrete, 0)
            return sum(categories)
        n_out = int(np.prod(spaces.action_shape))
        self.distribution = make_distribution(None, False, n_out)
        self.log_std = nn.Parameter(torch.full((n_out,), float(config.log_std_init)))
        return n_out

    def _make_encoders(self, spaces: EnvSpaces, config: ActorConfig) -> int:
        """The policy's encoder and the value's (the same one with a shared trunk); the
        width of their features."""

        def encoder() -> nn.Module:
            if config.network:  # the user's own (hpcrl.components.contracts.Network)
                return make_network(config.network, config.network_kwargs,
                                    spaces.observation_space)
            return make_encoder(config.encoder, self.obs_format, config.features,
                                config.channels, compute_dtype(config.compute_dtype),
                                config.encoder_init)

        self.pi_encoder = encoder()
        features = features_of(self.pi_encoder)
        self.vf_encoder = self.pi_encoder if self.shared else encoder()
        return features

    def _make_cores(self, config: ActorConfig, features: int) -> int:
        """The memory cores after the encoders (none without ``actor.memory``); the width
        of the features that enter the trunks."""

        def core() -> MemoryCore | None:
            if config.memory == "none":
                return None
            return MemoryCore(config.memory, features, config.memory_size, config.memory_layers)

        self.pi_core = core()
        self.vf_core = self.pi_core if self.shared else core()
        return features if self.pi_core is None else self.pi_core.features

    def _make_trunks_and_heads(self, config: ActorConfig, features: int, n_out: int,
                               rnd: RndConfig | None) -> int:
        """The MLP trunks, the policy head and the value heads; the trunks' output width."""
        hidden = list(config.hidden_sizes)
        self.pi_trunk = mlp([features] + hidden, config.activation)
        self.vf_trunk = self.pi_trunk if self.shared else mlp([features] + hidden,
                                                              config.activation)
        width = hidden[-1] if hidden else features
        self.pi_head = nn.Linear(width, n_out)
        # with RND a second value head, the intrinsic one (column 1); collectors and the
        # returns of every other agent see the extrinsic head alone (column 0)
        self.value_heads = 2 if rnd is not None and rnd.enabled else 1
        self.vf_head = nn.Linear(width, self.value_heads)
        return width

    def _orthogonal_init(self) -> None:
        """``actor.ortho_init``: orthogonal weights for the encoders, trunks and heads."""
        for part in (self.pi_encoder, self.pi_trunk) + (
                () if self.shared else (self.vf_encoder, self.vf_trunk)):
            orthogonal_init(part, math.sqrt(2))
        orthogonal_init(self.pi_head, 0.01)
        orthogonal_init(self.vf_head, 1.0)
        reset_fixup(self)  # Fixup's residual blocks keep their own initial values

    def _make_predictor_head(self, predictors: Sequence[str], width: int,
                             ortho_init: bool) -> None:
        """The policy-loss add-ons' predictors (algo.addons): one output column each, on
        the policy trunk's features; made last, so that every other weight is what it is
        without them."""
        self.predictors = tuple(predictors)
        self.predictor_head = nn.Linear(width, len(self.predictors)) if predictors else None
        if self.predictor_head is not None and ortho_init:
            orthogonal_init(self.predictor_head, 1.0)

    def _heads(self, pi: torch.Tensor, vf: torch.Tensor | None, predict: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Distribution parameters, values ``[B]`` (``[B, 2]`` with an intrinsic head; None
        when ``vf`` is) and, with ``predict``, the predictor heads' outputs ``[B, k]`` (None
        otherwise, or without predictors) from the features that enter the trunks (encoded,
        through the memory cores). Trunks and heads run as chains of
        :func:`~hpcrl.models.mlp_kernel.run_mlps` (numpy on the CPU)."""
        predictor = self.predictor_head if predict else None
        chains: list[tuple[torch.Tensor, Sequence[nn.Module]]]
        if self.shared or predictor is not None:  # the policy's features are needed apart
            trunk = run_mlp(pi, self.pi_trunk)
            chains = [(trunk, (self.pi_head,))]
            if vf is not None:
                chains.append((trunk, (self.vf_head,)) if self.shared
                              else (vf, (self.vf_trunk, self.vf_head)))
            if predictor is not None:
                chains.append((trunk, (predictor,)))
        else:
            chains = [(pi, (self.pi_trunk, self.pi_head))]
            if vf is not None:
                chains.append((vf, (self.vf_trunk, self.vf_head)))
        out, *rest = run_mlps(*chains)
        values = rest[0] if vf is not None else None
        predictions = rest[-1] if predictor is not None else None
        if not self.integer_actions:
            out = torch.stack([out, self.log_std.expand_as(out)], dim=1)
        return out, (None if values is None else self._columns(values)), predictions

    def _columns(self, values: torch.Tensor) -> torch.Tensor:
        """Head outputs ``[B, heads]`` as values: ``[B]`` for one head, else as they are."""
        return values.squeeze(-1) if self.value_heads == 1 else values

    def _extrinsic(self, values: torch.Tensor) -> torch.Tensor:
        """The extrinsic values ``[B]`` of :meth:`_columns`' output: what collectors store."""
        return values if self.value_heads == 1 else values[..., 0]

    # -- acting ------------------------------------------------------------------------------
    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> NumpyEngine | TorchEngine:
        """How collectors and inference ranks act with this actor: in numpy when it is a
        feedforward MLP on the CPU (:class:`~hpcrl.models.actor_engines.NumpyEngine`), else
        by torch (:class:`~hpcrl.models.actor_engines.TorchEngine`, compiled when
        ``compile``); ``envs`` unused (the collector carries a recurrent state)."""
        on_cpu = next(self.parameters()).device.type == "cpu"
        if on_cpu and isinstance(self.pi_encoder, FormatEncoder) and not self.recurrent:
            return NumpyEngine(self)
        return TorchEngine(self, compile)

    # -- memory ------------------------------------------------------------------------------
    @property
    def recurrent(self) -> bool:
        """The actor has a memory core (and a state to carry)."""
        return self.pi_core is not None

    @property
    def state_size(self) -> int:
        """Floats of one env's flat recurrent state (0 without memory)."""
        if self.pi_core is None or self.vf_core is None:  # built together: both or neither
            return 0
        own = 0 if self.shared else self.vf_core.state_size
        return self.pi_core.state_size + own

    def initial_state(self, batch: int) -> torch.Tensor:
        """The state of ``batch`` envs at an episode's start: zeros ``[batch, state_size]``."""
        return torch.zeros(batch, self.state_size, device=self.pi_head.weight.device)

    def _memory(self) -> tuple[MemoryCore, MemoryCore]:
        """The policy and value memory cores of a recurrent actor (the same one when the
        trunk is shared); only recurrent code paths call it."""
        if self.pi_core is None or self.vf_core is None:
            raise TypeError("this actor has no memory core (actor.memory is 'none')")
        return self.pi_core, self.vf_core

    def _split(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        size = self._memory()[0].state_size
        return state[..., :size], state[..., size:]

    def _cores(self, pi: torch.Tensor, vf: torch.Tensor, state: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Encoded features ``[B, F]`` through the memory cores, one step from ``state``."""
        if not self.recurrent:
            return pi, vf, None
        pi_core, vf_core = self._memory()
        if state is None:
            state = self.initial_state(pi.shape[0])
        pi_state, vf_state = self._split(state)
        pi, new = pi_core.step(pi, pi_state)
        if self.shared:
            return pi, pi, new
        vf, new_vf = vf_core.step(vf, vf_state)
        return pi, vf, torch.cat([new, new_vf], dim=-1)

    # -- one step -----------------------------------------------------------------------------
    def dist_and_value(self, obs: torch.Tensor, state: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Distribution parameters, values ``[B]`` and the next recurrent state (None without
        memory) for normalised observations ``[B, ...]`` seen from ``state``."""
        params, values, state, _ = self._outputs(obs, state, predict=False)
        return params, values, state

    def _outputs(self, obs: torch.Tensor, state: torch.Tensor | None, predict: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                            torch.Tensor | None]:
        """:meth:`dist_and_value`'s outputs and, with ``predict``, the predictors'."""
        pi = self.pi_encoder(obs)
        vf = pi if self.shared else self.vf_encoder(obs)
        pi, vf, state = self._cores(pi, vf, state)
        params, values, predictions = self._heads(pi, vf, predict)
        assert values is not None  # vf was given
        return self.legal(params, obs), values, state, predictions

    def legal(self, logits: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """``logits`` with the moves that the observations' masks say are illegal pushed to
        probability 0 (``actor.action_mask``; unchanged without it). A large finite logit,
        not minus infinity, so that entropies and KLs stay finite (0 x log 0 terms)."""
        if not self.mask_size:
            return logits
        mask = obs.reshape(logits.shape[0], -1)[:, -self.mask_size:] > 0.5
        return logits.masked_fill(~mask, ILLEGAL_LOGIT)

    def _last_legal(self, actions: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Sampled actions, each kept at or below its row's last legal move (a uniform
        that the float cumulative sum rounds past every legal move otherwise picks the
        last move, which may be illegal)."""
        if not self.mask_size:
            return actions
        moves = torch.arange(logits.shape[-1], device=logits.device)
        last = torch.where(logits > ILLEGAL_LOGIT / 2, moves, -1).max(dim=-1).values
        return torch.minimum(actions, last)

    def value(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """Values ``[B]`` of normalised observations (seen from ``state``, when recurrent)."""
        return self._extrinsic(self.all_values(obs, state))

    def all_values(self, obs: torch.Tensor, state: torch.Tensor | None = None
                   ) -> torch.Tensor:
        """Values of every head: ``[B]``, or ``[B, 2]`` (extrinsic, intrinsic) with RND."""
        if self.recurrent:
            return self.dist_and_value(obs, state)[1]
        return self._columns(run_mlp(self.vf_encoder(obs), self.vf_trunk, self.vf_head))

    def step(self, obs: torch.Tensor, noise: torch.Tensor, state: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Sampled actions, their log-probs, the values and the next state, for collectors."""
        params, values, state = self.dist_and_value(obs, state)
        actions = self._last_legal(self.distribution.sample(params, noise), params)
        return (actions, self.distribution.log_prob(params, actions), self._extrinsic(values),
                state)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs of ``actions``, entropies and values (of every head), for the loss
        (feedforward)."""
        log_probs, entropy, values, _, _ = self.evaluate_outputs(obs, actions, predict=False)
        return log_probs, entropy, values

    def evaluate_outputs(self, obs: torch.Tensor, actions: torch.Tensor,
                         predict: bool = True) -> ActorOutputs:
        """:meth:`evaluate`'s outputs with the distribution parameters and (``predict``)
        the predictor heads' outputs (feedforward)."""
        params, values, _, predictions = self._outputs(obs, None, predict)
        log_probs, entropy = self.distribution.log_prob_entropy(params, actions)
        return ActorOutputs(log_probs, entropy, values, params, predictions)

    def policy_params(self, obs: torch.Tensor) -> torch.Tensor:
        """Distribution parameters of normalised observations ``[B, ...]`` (feedforward):
        what another run's policy gives a KL add-on."""
        return self.legal(self._heads(self.pi_encoder(obs), None)[0], obs)

    # -- sequences ----------------------------------------------------------------------------
    def evaluate_sequences(self, obs: torch.Tensor, actions: torch.Tensor,
                           state: torch.Tensor, starts: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs, entropies and values ``[T, B]`` of sequences ``[T, B, ...]`` recomputed
        from their start states ``[B, state_size]``, the state zeroed where ``starts [T, B]``
        says an episode begins inside a sequence."""
        out = self.evaluate_sequence_outputs(obs, actions, state, starts, predict=False)
        return out.log_probs, out.entropy, out.values

    def evaluate_sequence_outputs(self, obs: torch.Tensor, actions: torch.Tensor,
                                  state: torch.Tensor, starts: torch.Tensor,
                                  predict: bool = True) -> ActorOutputs:
        """:meth:`evaluate_sequences`'s outputs with the distribution parameters and
        (``predict``) the predictor heads' outputs, each ``[T, B, ...]``."""
        steps, batch = starts.shape
        flat_obs = obs.reshape((steps * batch,) + obs.shape[2:])
        pi = self.pi_encoder(flat_obs)
        vf = pi if self.shared else self.vf_encoder(flat_obs)
        pi_core, vf_core = self._memory()
        pi_state, vf_state = self._split(state)
        pi = pi_core.sequence(pi.view(steps, batch, -1), pi_state, starts).flatten(0, 1)
        if self.shared:
            vf = pi
        else:
            vf = vf_core.sequence(vf.view(steps, batch, -1), vf_state, starts).flatten(0, 1)
        params, values, predictions = self._heads(pi, vf, predict)
        params = self.legal(params, flat_obs)
        assert values is not None  # vf was given
        flat_actions = actions.reshape((steps * batch,) + actions.shape[2:])
        log_probs, entropy = self.distribution.log_prob_entropy(params, flat_actions)

        def unflat(x: torch.Tensor) -> torch.Tensor:
            return x.view((steps, batch) + x.shape[1:])

        return ActorOutputs(unflat(log_probs), unflat(entropy), unflat(values), unflat(params),
                            None if predictions is None else unflat(predictions))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Carried observations as the networks take them (normalised when the run does;
        integer observations are left as they are, to be one-hot encoded)."""
        if not self.normalize_obs:
            return obs  # the encoders take the carried dtype (uint8 frames stay small)
        obs = obs.float()
        mean = self.obs_rms.mean.float()
        std = self.obs_rms.std().float()
        return ((obs - mean) / std).clamp(-self.clip_obs, self.clip_obs)

    def forward(self, obs: ObsInput, state: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Deterministic actions for raw observations: one, as the env returns it (an array,
        an integer, a tuple), or a batch ``[B, *obs_shape]``.

        A recurrent actor (:attr:`recurrent`) returns ``(actions, state)``: pass ``state``
        back with the next observation of the same episode, and None (zeros) at an
        episode's start, one row ``[state_size]`` for one observation, ``[B, state_size]``
        for a batch::

            state = None
            obs, _ = env.reset()
            while not done:
                action, state = policy(obs, state)
                obs, reward, terminated, truncated, _ = env.step(action)
        """
        obs, single = self.obs_format.as_batch(obs)
        device = self.pi_head.weight.device  # the actor may live on an accelerator
        obs = obs.to(device)
        if not self.recurrent:
            params = self.policy_params(self.normalize(obs))
            actions = self.distribution.mode(params)
            return actions[0] if single else actions
        if state is not None:
            state = torch.as_tensor(state, dtype=torch.float32, device=device)
            state = state.unsqueeze(0) if single else state
        params, _, state = self.dist_and_value(self.normalize(obs), state)
        assert state is not None  # a recurrent actor's step always returns its next state
        actions = self.distribution.mode(params)
        return (actions[0], state[0]) if single else (actions, state)


def actor_on(actor: M, device: torch.device | None) -> M:
    """``actor`` (an actor-critic, or any acting policy) moved to ``device`` (left where it
    is for None or the CPU), with its flat parameter views rebuilt there: the cached views
    of the old storage are dropped."""
    if device is None or device.type == "cpu":
        return actor
    actor = actor.to(device)
    actor.__dict__.pop("_hpcrl_flat_params", None)
    actor.__dict__.pop("_hpcrl_params", None)
    contiguous_parameters(actor)
    return actor
