"""The one contract every algorithm implements, on-policy and off-policy alike.

An algorithm turns a batch into a flat gradient (:meth:`Algorithm.compute_gradients`, which
needs only the weights) and applies flat gradients with its own optimisers
(:meth:`Algorithm.apply_gradients`): that split is what lets gradient ranks and the rank
that updates live in different processes. It declares what it learns from and supports in
:attr:`Algorithm.capabilities`, names the loss terms it reports in
:attr:`Algorithm.stat_names`, follows the run's progress for its schedules, publishes
:attr:`Algorithm.policy` to whoever acts and keeps its state for checkpoints.

The two families derive from it: :class:`~hpcrl.algorithms.on_policy.OnPolicyAlgorithm`
(PPO, A2C, IMPALA: batches cut from rollouts, over one actor-critic) and
:class:`~hpcrl.algorithms.off_policy.OffPolicyAlgorithm` (DQN, SAC, TD3, DDPG,
MPO: batches sampled from a replay, over several networks with targets). What is common
to both is written here once; what a family adds (minibatches of a rollout, segments and
target networks) is its base's.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.family import Family
from hpcrl.algorithms.key_rules import Rule
from hpcrl.numerics.gradient_guard import GradientGuard
from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.rnd_section import RndConfig
from hpcrl.sections.schema import ActorConfig, AlgoConfig, EnvConfig

if TYPE_CHECKING:  # annotations only
    from hpcrl.envs.vector import EnvSpaces
    from hpcrl.numerics.reducer import Reducer

#: How hpcrl builds every algorithm, built in or a plug-in (``algo.kwargs`` follow).
CONSTRUCTOR = "Class(spaces, settings, device, reducer, **algo.kwargs)"


@dataclass(frozen=True)
class AlgorithmSettings:
    """What an algorithm is built from: the parts of the run's config it reads, and no
    others (not the scheme, the training loop's budget or the logs).

    The registry makes it once from the run's config
    (:func:`~hpcrl.algorithms.registry.algorithm_settings`) for the class it builds, so
    ``own`` is that class's own section (``algo.<section>``; None for one with no keys of
    its own, A2C).
    """

    algo: AlgoConfig  # the shared algo.* keys: lr and its schedule, gamma, addons, ...
    own: Any  # its own section, algo.<section_name()>
    actor: ActorConfig  # its networks
    env: EnvConfig  # the observation normaliser's keys; MPC's reward function's env
    rnd: RndConfig  # RND's exploration bonus (on-policy actor-critics)
    replay: ReplayConfig  # the replay's keys (off-policy: prioritised, n-step, ...)
    seed: int  # every rank's networks start from this seed
    on_nonfinite: str  # train.on_nonfinite: what a non-finite loss or gradient does


def linear_schedule(initial: float, kind: str, progress: float) -> float:
    """``initial`` (constant) or ``initial * (1 - progress)`` (linear decay to 0)."""
    return initial * (1.0 - progress) if kind == "linear" else initial


class Algorithm(ABC):
    """A learning rule: gradients of a batch, their application, and what it declares.

    ``capabilities`` is read by the config checks, ``hpcrl plan``, the collectors and the
    placements instead of the algorithm's name; ``stat_names`` lists the loss terms each
    gradient reports, in a fixed order, so they travel as a plain float vector beside the
    gradient and become ``progress.csv`` columns. ``guard`` applies ``train.on_nonfinite``
    to the loss terms and to each gradient applied; ``algo`` is the run's ``algo`` section,
    whose ``lr`` and ``lr_schedule`` give :attr:`learning_rate`, ``own`` its own section
    and ``settings`` all it is built from (:class:`AlgorithmSettings`).

    Every algorithm of either family is built the same way, by
    :func:`~hpcrl.algorithms.registry.make_algorithm`, as :data:`CONSTRUCTOR`:
    ``Class(spaces, settings, device, reducer, **algo.kwargs)`` (``constructor_args``). What
    differs between algorithms is declared on the class and read through it, never
    branched on by name: :attr:`kind` (the built-in whose defaults and recipes it runs
    with), :attr:`section` and :attr:`section_keys` (its own ``algo.<section>`` keys),
    :attr:`defaults` (its standard values of the shared keys), the range rules of its keys
    (:attr:`section_rules`, :meth:`section_problem`), its acting policy
    (:meth:`policy_for`), and what generic code needs of its section
    (:meth:`demonstrations`, :meth:`epsilon_keys`, :meth:`collector_priorities`).
    """

    stat_names: tuple[str, ...] = ()
    stat_example: ClassVar[tuple[str, ...]] = ("loss",)  # a family's loss terms, for refusals
    capabilities: ClassVar[Capabilities]  # each family's base or algorithm declares its own
    # the positional arguments hpcrl builds every algorithm with (algo.kwargs follow)
    constructor_args: ClassVar[tuple[str, ...]] = ("spaces", "settings", "device", "reducer")
    # the built-in (registry name) whose defaults, recipes and presets it runs with: each
    # built-in names itself, a subclass inherits it; None: its family's default_kind()
    kind: ClassVar[str | None] = None
    # its own config section, algo.<section>: None reads algo.<kind> (the one of the
    # built-in it runs as); each built-in names its own, and a plug-in with keys of its own
    # names its section here and declares its keys in section_keys
    section: ClassVar[str | None] = None
    # the dataclass of its own section (field defaults are its defaults); None for an
    # algorithm with no keys of its own (A2C). A built-in's dataclass is the config's data
    # (hpcrl.sections.algorithm_keys, as AlgoConfig holds it), re-exported by its folder
    section_keys: ClassVar[type | None] = None
    # the standard value of every shared key whose good value depends on the algorithm
    # (``{"algo.lr": 3e-4, "replay.batch_size": 256, ...}``), filled in under the keys a
    # config sets; a plug-in runs with those of the built-in it runs as
    defaults: ClassVar[Mapping[str, Any]] = {}
    # the range rules of its own section's keys: (leaf, rule) pairs, each rule given the
    # key's full name and its value (hpcrl.algorithms.key_rules); a plug-in's section
    # is checked by those of the built-in it runs as, for the keys it shares, and by its
    # own section_problem
    section_rules: ClassVar[tuple[Rule, ...]] = ()
    algo: AlgoConfig
    guard: GradientGuard
    progress: float = 0.0

    # -- what the class declares -------------------------------------------------------------
    @classmethod
    def runs_as(cls) -> str:
        """The built-in whose defaults, recipes and presets this class runs with: its
        declared :attr:`kind`, else its family's :meth:`default_kind`."""
        return cls.kind if cls.kind is not None else cls.default_kind()

    @classmethod
    def reported_stats(cls, rnd: bool, addons: Any = None) -> tuple[str, ...]:
        """The figures an instance reports in each progress row besides the common ones:
        its loss terms (:attr:`stat_names`); each family's base adds its own (RND's and the
        add-ons' terms on-policy with ``rnd`` and ``addons``, the replay ratio off-policy)."""
        return cls.stat_names

    @classmethod
    def plugin_problem(cls) -> str | None:
        """Why a plug-in class breaks its family's own terms (beyond the contract), or
        None: each family's base says."""
        return None

    @classmethod
    @abstractmethod
    def default_kind(cls) -> str:
        """The built-in a direct subclass of a family's base runs as (each base says)."""

    @classmethod
    def section_name(cls) -> str:
        """The name of its own config section, ``algo.<name>``: :attr:`section`, else the
        section of the built-in it runs as."""
        return cls.section if cls.section is not None else cls.runs_as()

    @classmethod
    def section_problem(cls, own: Any) -> str | None:
        """Why the values of its own section ``own`` are out of range or do not fit
        together, or None: a plug-in with :attr:`section_keys` states its range rules here
        (validation asks before the run starts, after :attr:`section_rules`)."""
        return None

    @classmethod
    @abstractmethod
    def policy_for(cls, spaces: EnvSpaces, settings: AlgorithmSettings) -> nn.Module:
        """A fresh acting policy of an algorithm built from ``settings`` over ``spaces``,
        initialised from ``settings.seed``: what collectors act with and ``load_policy``
        returns (each family's base defines it)."""

    @classmethod
    def slot_play(cls, own: Any, total_envs: int) -> Any | None:
        """What some slots of a job of ``total_envs`` envs play instead of stepping an env
        (a :class:`~hpcrl.envs.scripted.SlotPlay`: PPO+D's demonstrations), as its section
        ``own`` asks; None (the default) when every slot steps an env. The env layer makes
        the collectors' envs with it (:func:`~hpcrl.envs.scripted.collector_env_groups`)."""
        return None

    @classmethod
    def epsilon_keys(cls, own: Any) -> Any | None:
        """Its epsilon-greedy keys (``exploration_*``, ``per_collector_eps``,
        ``collector_eps_*``) when it explores epsilon-greedily, else None."""
        return None

    @classmethod
    def collector_priorities(cls, own: Any) -> bool:
        """Whether its collectors compute each transition's initial replay priority."""
        return False

    def __init__(self, spaces: EnvSpaces, settings: AlgorithmSettings,
                 device: torch.device | str = "cpu", reducer: Reducer | None = None) -> None:
        """What every algorithm keeps: the env's spaces, what it is built from
        (``settings``, the shared keys in ``algo`` and its own section in ``own``), the
        device its learner runs on and the non-finite guard."""
        self.spaces, self.settings = spaces, settings
        self.algo = settings.algo
        self.own: Any = settings.own
        self.device = torch.device(device)
        self.guard = GradientGuard(settings.on_nonfinite)
        self.progress = 0.0

    # -- what the algorithm learns from ------------------------------------------------------
    @property
    @abstractmethod
    def policy(self) -> nn.Module:
        """The module that acts: what collectors and inference ranks receive as weights and
        checkpoints save as the policy."""

    @abstractmethod
    def loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss of ``batch`` and its terms as floats (named by ``stat_names``)."""

    @abstractmethod
    def compute_gradients(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The flat gradient of :meth:`loss` on ``batch`` and its terms; the weights are
        not changed, so a process without optimisers can compute it."""

    @abstractmethod
    def apply_gradients(self, flat_grads: torch.Tensor) -> dict[str, float]:
        """One optimiser step with ``flat_grads`` (clipped by ``algo.max_grad_norm``);
        returns at least ``grad_norm`` (before clipping) and ``learning_rate``. A
        non-finite gradient is refused by ``guard``: it raises, or the step is dropped."""

    # -- schedules ---------------------------------------------------------------------------
    def set_progress(self, fraction: float) -> None:
        """Tell the schedules how far training is (0 at the start, 1 at the end)."""
        self.progress = min(max(fraction, 0.0), 1.0)

    @property
    def learning_rate(self) -> float:
        """``algo.lr`` under ``algo.lr_schedule`` at the current progress."""
        return linear_schedule(self.algo.lr, self.algo.lr_schedule, self.progress)

    # -- checkpoints -------------------------------------------------------------------------
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the algorithm (optimisers, schedules' progress, and
        whatever else the weights alone do not restore)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""

    # -- what the collectors and the placements read of the class ----------------------------
    # (each family's base sets them; a plug-in inherits its base's)
    family: ClassVar[Family]
    """Its family, one declared object (:mod:`~hpcrl.algorithms.family`): what feeds its
    learner, what its collectors fill and stream (its unit: a ``"rollout"``, learnt from
    once, or a ``"chunk"`` of transitions added to a replay), what an inference rank answers
    for it, and the plan's line about it. The placements ask it and never look the family
    up: a plug-in of a family of its own declares its own object."""

    rate_limits_collectors: ClassVar[bool] = False
    """Whether its learner may hold its collector ranks back: a learner that falls behind
    its rate of gradient steps per env step leaves a collector's next unit unreceived, so
    the collectors send synchronously and wait (``replay.ratio_tolerance``)."""

    collectors_keep_parameters: ClassVar[bool] = False
    """Whether a collector that an inference rank acts for still takes each new version's
    parameters, not only its header (command, version, normalisers): it computes something
    of its own with them (the initial priorities of its transitions)."""

    acts_on_device: ClassVar[bool] = True
    """Whether an inference rank serves its acting policy on the rank's device
    (``scheme.inference_device``, compiled under ``train.compile``), or in numpy on the CPU
    whatever the device (``auto`` then picks the CPU): a small policy acting for a few envs
    loses more to the transfers than a device gains it."""

    saved_policy_kind: ClassVar[str]
    """What its acting policy is, in the words a saved policy's ``acts_with`` uses:
    ``"actor_critic"`` (rebuilt from the record's sections alone, without the class) or
    ``"policy"`` (its own module, rebuilt by its class's :meth:`policy_for`): how a record
    written before records said so is read back."""
