"""The on-policy family's base: one actor-critic, batches cut from the rollouts just collected.

It implements :class:`~hpcrl.algorithms.algorithm.Algorithm` over the actor:
``compute_gradients`` needs only the actor's weights, ``apply_gradients`` owns the optimiser.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import torch
import torch.nn.functional as F

from hpcrl.algorithms.addons import PolicyLossAddons, PolicyOutputs, addon_stat_names
from hpcrl.algorithms.algorithm import Algorithm, AlgorithmSettings
from hpcrl.algorithms.capabilities import ON_POLICY_GAE, Capabilities, Storage
from hpcrl.algorithms.family import ROLLOUTS, Family
from hpcrl.buffers.intrinsic import IntrinsicTargets
from hpcrl.buffers.rollout import Rollout
from hpcrl.buffers.rollout_storage import RecurrentBatch, RolloutBatch
from hpcrl.envs.vector import EnvSpaces
from hpcrl.models.actor import ActorCritic, ActorOutputs, actor_on
from hpcrl.numerics.flat import contiguous_parameters, grads_to_flat, zero_flat_gradients
from hpcrl.numerics.optim import FlatOptimizer, make_flat_optimizer
from hpcrl.numerics.reducer import LocalReducer, Reducer, global_mean_std
from hpcrl.sections.policy_addons import PolicyAddonsConfig

# What an algorithm trains from and on: RolloutStorage and its GaeBatch (PPO, A2C), or
# VTraceStorage and its SequenceBatch (IMPALA); a plug-in that names neither gets Any.
StorageT = TypeVar("StorageT")
BatchT = TypeVar("BatchT")


def entropy_bonus(entropy: torch.Tensor, coef: float) -> tuple[torch.Tensor | float,
                                                                 torch.Tensor]:
    """``coef x mean(entropy)``, the term the loss subtracts, and the mean itself (a stat).

    With ``coef`` 0 (CartPole's recipe, say) the entropy stays out of the backward pass: the
    loss and its gradient are what they would be, without the work of differentiating a
    term that is multiplied by zero."""
    if coef == 0.0:
        return 0.0, entropy.detach().mean()
    mean = entropy.mean()
    return coef * mean, mean


def value_error(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """The mean squared error of the values to their returns, summed over value heads:
    ``values``/``returns`` are ``[B]``, or ``[B, 2]`` for RND's extrinsic and intrinsic heads
    (Burda et al. add the two value losses)."""
    if values.dim() == 1:
        return F.mse_loss(values, returns)
    return (values - returns).pow(2).mean(dim=0).sum()


class OnPolicyAlgorithm(Algorithm, Generic[StorageT, BatchT]):
    """An on-policy learning rule over an actor-critic.

    Generic in the storage it cuts batches from and the batches it trains on
    (``OnPolicyAlgorithm[RolloutStorage, GaeBatch]`` for ``storage = "gae"``,
    ``OnPolicyAlgorithm[VTraceStorage, SequenceBatch]`` for ``"vtrace"``), so that each
    algorithm's :meth:`minibatches` and :meth:`loss` keep the base's signatures. It builds
    its actor-critic (:meth:`policy_for`, on ``device``) and reads the shared ``algo.*`` keys
    in ``algo`` and its own section in ``own``.
    """

    # the batches it trains on: "gae" (RolloutStorage), "vtrace" (VTraceStorage)
    storage: Storage = "gae"
    # what it learns from and supports (a plug-in's storage above overrides the storage here)
    capabilities: ClassVar[Capabilities] = ON_POLICY_GAE
    RND_STATS = ("rnd_loss",)  # what an actor with RND adds to stat_names

    def __init__(self, spaces: EnvSpaces, settings: AlgorithmSettings,
                 device: torch.device | str = "cpu", reducer: Reducer | None = None) -> None:
        super().__init__(spaces, settings, device, reducer)
        self.actor = actor_on(type(self).policy_for(spaces, settings), self.device)
        self.reducer: Reducer = reducer or LocalReducer()
        self._optimizer: FlatOptimizer | None = None
        # RND (actor.rnd): the update's intrinsic targets, and the predictor's loss, which
        # compute_gradients adds to the algorithm's own
        self.intrinsic: IntrinsicTargets | None = None
        if getattr(self.actor, "rnd", None) is not None:
            self.intrinsic = IntrinsicTargets(self.actor, self.reducer)
        # the policy-loss add-ons (algo.addons), and what the loss's evaluation of the
        # minibatch left them (set by evaluate(), read by compute_gradients)
        section: PolicyAddonsConfig = self.algo.addons
        self.addons = (PolicyLossAddons(section, self.actor.distribution)
                       if section.enabled else None)
        self._outputs: PolicyOutputs | None = None
        if self.intrinsic is not None or self.addons is not None:
            self.stat_names = type(self).reported_stats(self.intrinsic is not None, section)

    stat_example = ("policy_loss",)

    @classmethod
    def plugin_problem(cls) -> str | None:
        """An on-policy class trains on GAE rollouts or V-trace sequences: its ``storage``
        must name one."""
        if cls.storage not in ("gae", "vtrace"):
            return f"{cls.__name__}.storage is {cls.storage!r}; it must be 'gae' or 'vtrace'"
        return None

    @classmethod
    def default_kind(cls) -> str:
        """A direct subclass runs as ``impala`` when it wants V-trace batches, else
        ``a2c`` (the built-ins of one gradient step per update)."""
        return "impala" if cls.storage == "vtrace" else "a2c"

    @classmethod
    def policy_for(cls, spaces: EnvSpaces, settings: AlgorithmSettings) -> ActorCritic:
        """The actor-critic of ``settings.actor`` over ``spaces`` (with the observation
        normaliser of ``env.normalize_obs``, RND heads and the add-ons' predictors),
        initialised from ``settings.seed``: the same weights on every rank."""
        env, predictors = settings.env, settings.algo.addons.predictors
        with torch.random.fork_rng():
            torch.manual_seed(settings.seed)
            actor = ActorCritic(spaces, settings.actor, env.normalize_obs, env.clip_obs,
                                settings.rnd, predictors)
        contiguous_parameters(actor)
        return actor

    @classmethod
    def reported_stats(cls, rnd: bool, addons: PolicyAddonsConfig | None = None
                       ) -> tuple[str, ...]:
        """The loss terms an instance reports: :attr:`stat_names`, RND's with ``rnd``, and
        those of the policy-loss add-ons of ``addons`` (``algo.addons``)."""
        return cls.stat_names + (cls.RND_STATS if rnd else ()) + addon_stat_names(addons)

    @property
    def policy(self) -> ActorCritic:
        """The actor-critic: collectors act with it, checkpoints save it."""
        return self.actor

    # -- gradients ---------------------------------------------------------------------------
    @abstractmethod
    def minibatches(self, storage: StorageT, update: int, seed: int, total_envs: int,
                    count: int) -> Iterator[BatchT]:
        """The batches of one update, one gradient step each, in order.

        ``total_envs`` is the number of envs of the whole job (the batch order is drawn over
        all of them); ``count`` the number of minibatches per epoch.
        """

    @abstractmethod
    def steps_per_update(self, count: int) -> int:
        """Gradient steps :meth:`minibatches` yields per update (``count`` per epoch)."""

    @abstractmethod
    def loss(self, batch: BatchT) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss of ``batch`` and its terms as floats."""

    def advantages(self, batch: RolloutBatch) -> torch.Tensor:
        """The batch's advantages, normalised to zero mean and unit std over the minibatch of
        the whole job (every gradient rank's part) when ``algo.normalize_advantage``: what
        keeps a loss independent of how envs are spread over ranks."""
        adv = batch.advantages
        if not self.algo.normalize_advantage:
            return adv
        mean, std = global_mean_std(adv, self.reducer)
        return (adv - mean) / (std + 1e-8)

    def evaluate(self, batch: RolloutBatch | RecurrentBatch
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, RolloutBatch]:
        """Log-probs of the batch's actions, entropies and values under the current weights,
        and the batch's samples flattened in the same order. A recurrent batch is recomputed
        sequence by sequence from its stored start states; its padding is left out. With
        policy-loss add-ons, what they read of the evaluation is kept for
        :meth:`compute_gradients`."""
        predict = self.addons is not None
        out: ActorOutputs
        if isinstance(batch, RecurrentBatch):
            out = self.actor.evaluate_sequence_outputs(batch.steps.obs, batch.steps.actions,
                                                       batch.memory, batch.starts, predict)
            out = out.map(batch.real)
            samples = batch.samples()
        else:
            out = self.actor.evaluate_outputs(batch.obs, batch.actions, predict)
            samples = batch
        if predict:
            returns = samples.returns if samples.returns.dim() == 1 else samples.returns[:, 0]
            self._outputs = PolicyOutputs(samples.obs, out.params, out.predictions,
                                          samples.rewards, returns)  # RND's: the extrinsic
        return out.log_probs, out.entropy, out.values, samples

    def addon_outputs(self, batch: BatchT) -> PolicyOutputs:
        """What the add-ons read of ``batch`` when the loss left them nothing (a plug-in's
        loss that evaluates the actor its own way): one more evaluation of it, by this
        base's :meth:`evaluate` whatever a subclass made of it (GAE batches;
        :class:`~hpcrl.algorithms.impala.vtrace_learner.IMPALA` evaluates its sequences)."""
        assert isinstance(batch, (RolloutBatch, RecurrentBatch))  # storage "gae"
        OnPolicyAlgorithm.evaluate(self, batch)
        assert self._outputs is not None  # evaluate() keeps them when there are add-ons
        return self._outputs

    def predictor_loss(self, batch: RolloutBatch | RecurrentBatch) -> torch.Tensor:
        """RND's predictor loss on ``batch``: the mean squared error over the samples its
        mask keeps, divided by their expected number (so that the mean of the ranks' losses
        is the loss of the whole minibatch, whichever rank holds which samples)."""
        assert self.intrinsic is not None
        steps = batch.samples() if isinstance(batch, RecurrentBatch) else batch
        errors = self.intrinsic.rnd.errors(self.intrinsic.normalized(steps.obs))
        expected = errors.numel() * self.intrinsic.config.update_proportion
        assert steps.rnd_mask is not None  # the storage gives RND's batches their mask
        return (errors * steps.rnd_mask).sum() / max(expected, 1e-8)

    def compute_gradients(self, batch: BatchT) -> tuple[torch.Tensor, dict[str, float]]:
        """The flat gradient of the loss on ``batch`` (the actor's weights are not changed);
        with RND, of the loss plus ``rnd.loss_coef`` x the predictor's; with policy-loss
        add-ons, plus their terms (:mod:`~hpcrl.algorithms.addons`)."""
        zero_flat_gradients(self.actor)
        self._outputs = None
        loss, stats = self.loss(batch)
        if self.intrinsic is not None:
            # RND runs on GAE batches only (config's check_rnd refuses other algorithms)
            assert isinstance(batch, (RolloutBatch, RecurrentBatch))
            rnd_loss = self.predictor_loss(batch)
            loss = loss + self.intrinsic.config.loss_coef * rnd_loss
            stats = {**stats, "rnd_loss": float(rnd_loss.detach())}
        if self.addons is not None:
            outputs = self._outputs if self._outputs is not None else self.addon_outputs(batch)
            self._outputs = None  # the graph goes with the backward below
            extra, extra_stats = self.addons.loss(outputs)
            loss = loss + extra
            stats = {**stats, **extra_stats}
        self.guard.check_loss(stats)
        loss.backward()
        return grads_to_flat(self.actor), stats

    # -- updates ---------------------------------------------------------------------------
    @property
    def optimizer(self) -> FlatOptimizer:
        """The optimiser, made on first use so gradient-only processes never hold its state."""
        if self._optimizer is None:
            flat = contiguous_parameters(self.actor)
            self._optimizer = make_flat_optimizer(self.algo.optimizer, flat.numel(),
                                                  self.algo.optimizer_eps, flat.device)
        return self._optimizer

    def apply_gradients(self, flat_grads: torch.Tensor, step: int = 0) -> dict[str, float]:
        """Clip ``flat_grads`` by global norm and take one optimiser step with them, on the
        actor's device (a host gradient, received from another process, is copied there).

        A non-finite gradient is refused by ``guard`` (``step``, the optimiser step number,
        names it): it raises, or the step is dropped and ``grad_norm`` reports the norm.
        """
        params = contiguous_parameters(self.actor)
        flat_grads = flat_grads.to(params.device, non_blocking=True)  # no-op where it lies
        norm = float(flat_grads.norm())
        if not self.guard.admit(norm, step):
            return {"grad_norm": norm, "learning_rate": self.learning_rate}
        max_norm = self.algo.max_grad_norm
        if max_norm > 0 and norm > max_norm:
            flat_grads = flat_grads * (max_norm / (norm + 1e-6))
        with torch.no_grad():
            self.optimizer.step(params, flat_grads, self.learning_rate)
        return {"grad_norm": norm, "learning_rate": self.learning_rate}

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the optimiser's state and the schedules' progress (and
        the fingerprints of the KL add-ons' policies)."""
        state = {"optimizer": self.optimizer.state_dict(), "progress": self.progress}
        if self.addons is not None and self.addons.fingerprints:
            state["kl_policies"] = list(self.addons.fingerprints)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; refuse KL add-on policies other than the
        ones the run started with."""
        if self.addons is not None and "kl_policies" in state:
            self.addons.check_fingerprints(state["kl_policies"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.progress = float(state["progress"])

    def prepare_rollouts(self, rollouts: Sequence[Rollout], total_envs: int) -> None:
        """Before an update's gradients: rewrite what the rollouts hold that only the
        learner can compute (PPO+D: the replayed actions' log-probabilities). Nothing by
        default."""

    # -- what the collectors and the placements read of the class (see Algorithm) ------------
    family: ClassVar[Family] = ROLLOUTS
    """It learns from rollouts: its collectors stream whole rollouts, each learnt from in the
    update it arrives for."""

    saved_policy_kind: ClassVar[str] = "actor_critic"
    """It acts with the actor-critic, which a saved policy rebuilds from its sections."""
