"""What every off-policy algorithm offers: gradients of a replay batch, and their application.

An algorithm owns several networks (policy, critics, a temperature) in one container whose
parameters are a single flat vector, cut into named *segments*, one per optimiser. The split
of PPO holds: :meth:`OffPolicyAlgorithm.compute_gradients` returns one flat gradient (every
segment's gradient comes from its own loss term: critics in a policy loss are evaluated with
detached weights), and :meth:`OffPolicyAlgorithm.apply_gradients` steps, for applied step
number ``k``, only the segments :meth:`stepping` names for ``k`` (TD3's policy gets no Adam
step on the steps it skips), then updates the target networks due at ``k``.
"""
from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from hpcrl.algorithms.algorithm import Algorithm, AlgorithmSettings
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.family import REPLAY
from hpcrl.buffers.replay.buffer import ReplayBatch
from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.continuous_policies import SquashedGaussianPolicy
from hpcrl.models.target import TargetNetwork
from hpcrl.numerics.flat import contiguous_parameters, share_flat_parameters, zero_flat_gradients
from hpcrl.numerics.optim import FlatOptimizer, make_flat_optimizer
from hpcrl.numerics.reducer import Reducer
from hpcrl.sections.schema import ActorConfig

NOISE_STREAM = 0x7A3  # seeds the learner's torch generator apart from everything else


# SB3's replay rhythm and continuous-control settings: one env, a progress row every 1000
# steps, Adam without clipping; SAC, TD3, DDPG, MPO and MPC start from these defaults
CONTINUOUS_DEFAULTS: dict[str, Any] = {
    "env.num_envs": 1, "actor.activation": "relu", "actor.ortho_init": False,
    "algo.num_steps": 1000, "algo.gamma": 0.99, "algo.lr_schedule": "constant",
    "algo.max_grad_norm": 0.0, "algo.optimizer": "adam", "algo.optimizer_eps": 1e-8,
    "replay.buffer_size": 1_000_000, "replay.batch_size": 256, "replay.learning_starts": 100,
    "replay.train_freq": 1, "replay.gradient_steps": 1, "replay.tau": 0.005,
    "replay.target_update_interval": 1, "replay.n_step": 1}


@dataclass(frozen=True)
class Segment:
    """The slice ``[start, end)`` of the flat parameters that one optimiser owns."""

    name: str
    start: int
    end: int

    @property
    def slice(self) -> slice:
        """``slice(start, end)``, to index the flat parameters with."""
        return slice(self.start, self.end)


class Scalar(nn.Module):
    """One learnable scalar (e.g. SAC's log temperature) as a module, so it has a segment."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(value)))


def learner_generator(seed: int) -> torch.Generator:
    """The learner's CPU torch generator for ``seed``, on a stream of its own (``NOISE_STREAM``)
    so its noise draws overlap no other seeded generator's."""
    state = np.random.SeedSequence([seed, NOISE_STREAM]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


def continuous_control(exploration: Literal["sampled policy", "action noise"]) -> Capabilities:
    """What a replay agent over bounded continuous actions and vector observations declares
    (SAC, TD3, DDPG, MPO): its policy squashes actions into the space's bounds, it keeps
    target networks, and its replay can relabel goals."""
    return Capabilities("replay", "replay", exploration, actions=("box",),
                        image_observations=False, bounded_actions=True, target_networks=True,
                        goal_relabelling=True)


def squashed_gaussian(spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
    """A fresh squashed Gaussian policy over ``spaces`` (SAC's and MPO's acting policy)."""
    return SquashedGaussianPolicy(spaces.obs_shape, as_box(spaces.action_space), actor,
                                  spaces.obs_format)


class OffPolicyAlgorithm(Algorithm):
    """Networks, per-segment optimisers and target networks of one off-policy learner: the
    off-policy family's base of :class:`~hpcrl.algorithms.algorithm.Algorithm`.

    Subclasses build their networks in :meth:`build` (returning them in segment order) and
    define :meth:`loss`, :meth:`stepping` and :meth:`update_targets`. ``steps`` counts the
    applied gradient steps; :meth:`compute_gradients` computes the gradient of step
    ``steps + 1``, so a gradient worker in another process sets ``steps`` from the version
    of the weights it computes with.

    Networks, targets and optimiser state live on ``device`` (``train.device``); the replay
    stays in host memory and each sampled batch is copied to the device
    (:meth:`ReplayBatch.to <hpcrl.buffers.replay.buffer.ReplayBatch.to>`).
    """

    @classmethod
    def reported_stats(cls, rnd: bool, addons: Any = None) -> tuple[str, ...]:
        """Its loss terms and the replay ratio it trained at (gradient steps per env step);
        an off-policy agent takes neither RND nor policy-loss add-ons (the config refuses
        them), so ``rnd`` and ``addons`` add nothing."""
        return cls.stat_names + ("replay_ratio",)

    def __init__(self, spaces: EnvSpaces, settings: AlgorithmSettings,
                 device: torch.device | str = "cpu", reducer: Reducer | None = None) -> None:
        super().__init__(spaces, settings, device, reducer)  # one learner: no reducer needed
        self.replay = settings.replay
        self.steps = 0
        self.generator = learner_generator(settings.seed)
        self.targets: dict[str, TargetNetwork[nn.Module]] = {}
        with torch.random.fork_rng():
            torch.manual_seed(settings.seed)
            parts = self.build()  # on the CPU: the same initial weights on every device
        for _, module in parts:
            module.to(self.device)
        for target in self.targets.values():
            target.to(self.device)
        self.nets = nn.Module()
        for name, module in parts:
            self.nets.add_module(name, module)
        self.flat = contiguous_parameters(self.nets)
        self.segments: dict[str, Segment] = {}
        offset = 0
        for name, module in parts:
            n = sum(p.numel() for p in module.parameters())
            self.segments[name] = Segment(name, offset, offset + n)
            share_flat_parameters(module, self.flat[offset:offset + n])  # one-copy publishing
            offset += n
        self._optimizers: dict[str, FlatOptimizer] | None = None
        self._priorities: torch.Tensor | None = None

    # -- what subclasses define --------------------------------------------------------------
    @abstractmethod
    def build(self) -> list[tuple[str, nn.Module]]:
        """The online networks in segment order; register target networks in ``targets``."""

    @classmethod
    @abstractmethod
    def acting_policy(cls, spaces: EnvSpaces, actor: ActorConfig) -> nn.Module:
        """A fresh policy of this algorithm for ``spaces``: what its collectors act with and
        ``load_policy`` returns (the same class as :attr:`policy`)."""

    @classmethod
    def policy_for(cls, spaces: EnvSpaces, settings: AlgorithmSettings) -> nn.Module:
        """The fresh policy an algorithm built from ``settings`` acts with, initialised from
        ``settings.seed``: :meth:`acting_policy` of ``settings.actor``. An algorithm whose
        policy needs more of its settings (MPC's planner reads its own section) overrides
        :meth:`fresh_policy`; hpcrl builds every policy through this."""
        with torch.random.fork_rng():
            torch.manual_seed(settings.seed)
            return cls.fresh_policy(spaces, settings)

    @classmethod
    def fresh_policy(cls, spaces: EnvSpaces, settings: AlgorithmSettings) -> nn.Module:
        """The acting policy of ``settings`` under the caller's random state:
        :meth:`acting_policy` of ``settings.actor``."""
        return cls.acting_policy(spaces, settings.actor)

    stat_example = ("q_loss",)

    @classmethod
    def plugin_problem(cls) -> str | None:
        """An off-policy class declares its capabilities (its action spaces and exploration
        decide its defaults and how its collectors act)."""
        if getattr(cls, "capabilities", None) is None:
            return (f"{cls.__name__} declares no capabilities; set the class attribute "
                    f"(hpcrl.Capabilities) or derive from a built-in, whose declaration it "
                    f"then inherits")
        return None

    @classmethod
    def default_kind(cls) -> str:
        """A direct subclass runs as ``dqn`` (its defaults and epsilon-greedy keys) when it
        acts on discrete actions, else as ``sac``."""
        return "dqn" if "discrete" in cls.capabilities.actions else "sac"

    @classmethod
    def epsilon_keys(cls, own: Any) -> Any | None:
        """Its own section when it explores epsilon-greedily (``algo.dqn``'s keys, or a
        plug-in section that derives from them), else None."""
        return own if cls.capabilities.exploration == "epsilon-greedy" else None

    @property
    @abstractmethod
    def policy(self) -> nn.Module:
        """The module collectors act with and checkpoints save as the policy."""

    @abstractmethod
    def loss(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The summed loss of every segment due at step ``steps + 1``, and its terms."""

    @abstractmethod
    def stepping(self, step: int) -> list[str]:
        """Names of the segments that applied step number ``step`` (from 1) changes."""

    @abstractmethod
    def update_targets(self, step: int) -> None:
        """Move the target networks due after applied step ``step``."""

    def observe(self, chunk: Transitions) -> None:
        """See the rows of a chunk as the replay takes them (before any batch of them is
        sampled): nothing by default; a model-based learner keeps statistics of them."""

    def segment_learning_rate(self, name: str, lr: float) -> float:
        """The learning rate segment ``name`` steps with when the schedule gives ``lr``: the
        same for every segment, unless an algorithm's duals have their own (MPO)."""
        return lr

    # -- gradients ---------------------------------------------------------------------------
    def compute_gradients(self, batch: ReplayBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The flat gradient of :meth:`loss` on ``batch`` (a view, valid until the next call;
        the weights are not changed)."""
        grads = zero_flat_gradients(self.nets)
        loss, stats = self.loss(batch)
        self.guard.check_loss(stats)
        loss.backward()  # accumulates into the views of ``grads``
        return grads, stats

    def gaussian(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard normal noise of ``shape`` on the learner's device, drawn from the
        learner's own CPU generator (so a GPU learner draws the numbers a CPU one does)."""
        return torch.randn(shape, generator=self.generator).to(self.device, non_blocking=True)

    def remember_td_errors(self, td_errors: torch.Tensor) -> None:
        """Keep ``|TD error|`` of the last batch for :meth:`priorities`."""
        self._priorities = td_errors.detach().abs()

    def priorities(self) -> np.ndarray:
        """New replay priorities (``|TD error|``) of the last batch's rows."""
        if self._priorities is None:
            raise RuntimeError("priorities() needs a compute_gradients() call first")
        return self._priorities.cpu().numpy()

    # -- updates -----------------------------------------------------------------------------
    @property
    def optimizers(self) -> dict[str, FlatOptimizer]:
        """One optimiser per segment, made on first use (gradient-only processes never hold
        their state)."""
        if self._optimizers is None:
            self._optimizers = {
                name: make_flat_optimizer(self.algo.optimizer, seg.end - seg.start,
                                          self.algo.optimizer_eps, self.flat.device,
                                          fused=True)
                for name, seg in self.segments.items()}
        return self._optimizers

    def apply_gradients(self, flat_grads: torch.Tensor) -> dict[str, float]:
        """Apply the gradient of step ``steps + 1``: clip and step each due segment by its
        own optimiser, count the step, update the due targets.

        A non-finite gradient is refused by ``guard``: it raises, or the step is dropped
        (weights, optimisers, targets and ``steps`` unchanged) and ``grad_norm`` reports it.
        """
        step = self.steps + 1
        lr = self.learning_rate
        max_norm = self.algo.max_grad_norm
        due = [self.segments[name] for name in self.stepping(step)]
        with torch.no_grad():
            norms = [float(torch.linalg.vector_norm(flat_grads[seg.slice])) for seg in due]
        total = math.sqrt(sum(n * n for n in norms))
        if not self.guard.admit(total, step):
            return {"grad_norm": total, "learning_rate": lr}
        with torch.no_grad():
            for seg, norm in zip(due, norms, strict=True):
                grads = flat_grads[seg.slice]
                if max_norm > 0 and norm > max_norm:
                    grads = grads * (max_norm / (norm + 1e-6))
                self.optimizers[seg.name].step(self.flat[seg.slice], grads,
                                               self.segment_learning_rate(seg.name, lr))
        self.steps = step
        self.update_targets(step)
        return {"grad_norm": total, "learning_rate": lr}

    def segment_params(self, name: str) -> torch.Tensor:
        """The flat parameters of one segment (a view)."""
        return self.flat[self.segments[name].slice]

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the flat parameters and targets (copies), each segment's
        optimiser, the applied step count, the progress and the noise generator's state."""
        return {"params": self.flat.detach().clone(),
                "targets": {name: t.flat.clone() for name, t in self.targets.items()},
                "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
                "steps": self.steps, "progress": self.progress,
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; a parameter count that differs (the network
        settings changed) raises ValueError."""
        if state["params"].numel() != self.flat.numel():
            raise ValueError(f"checkpoint holds {state['params'].numel()} learner parameters, "
                             f"this config builds {self.flat.numel()}: actor.* or replay.* "
                             f"network settings changed")
        with torch.no_grad():
            self.flat.copy_(state["params"])
            for name, target in self.targets.items():
                target.flat.copy_(state["targets"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        self.steps = int(state["steps"])
        self.progress = float(state["progress"])
        self.generator.set_state(state["generator"])

    # -- what the collectors and the placements read of the class (see Algorithm) ------------
    family = REPLAY
    """It learns from a replay: its collectors stream chunks of transitions into it."""

    rate_limits_collectors = True
    """Its learner paces its collectors to the replay ratio (``replay.ratio_tolerance``)."""

    collectors_keep_parameters = True
    """A collector keeps its policy's parameters even where an inference rank acts for it:
    it computes its chunks' initial priorities with its own Q-network."""

    acts_on_device = False
    """Its acting policy (a Q-network or a small actor) is served in numpy on the CPU."""

    saved_policy_kind = "policy"
    """It acts with its own policy module, which only its class rebuilds."""
