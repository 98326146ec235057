"""Acting engines: how a collector or an inference rank evaluates a policy, in numpy or in
torch, for every kind of policy hpcrl trains.

A collector asks its policy for actions once per env step, on a few observations. For the
small MLPs of classic control, torch's per-operation dispatch costs more than the
arithmetic, so on the CPU the networks are evaluated in numpy with the same weights
(float32; results agree with torch to rounding, which tests check). An engine holds *views*
of the module's weights where it can, and :meth:`sync` re-takes them after every load that
may have re-allocated them, or copies what it keeps as copies (a log std; the actor-critic's
policy and value networks, which its numpy engine stacks to run both in one call a layer).
torch serves image encoders, memory cores and other devices. In a deterministic job
(``train.deterministic``) an engine that can computes each row of a forward on its own
(``make_engine(..., rows_alone=True)``), so an env's results do not depend on the rows
beside it.

Every acting module declares its engine: its class's ``acting_engine(compile, envs)``
method (:class:`ActingModule`), which :func:`make_engine` calls, so a policy class of a
plug-in acts through the engine it declares, as the built-ins do. An actor-critic's
(:class:`PolicyEngine`: sampled actions, their log-probs, values and the next recurrent
state, for rollouts) is in :mod:`hpcrl.models.actor_engines`; an off-policy acting
policy's (:class:`ActingEngine`: greedy Q actions, deterministic actions, squashed Gaussian
samples, plans, for transition chunks) sits beside its module's class.

A collector asks for a group's actions (``submit`` / ``submit_act``) before it takes them
(``result`` / ``act_result``), so that an engine whose forward runs elsewhere (an inference
rank's) computes one group's actions while the collector steps another group. The engines
here compute at once and hand the answer over when it is taken.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np
from torch import nn

if TYPE_CHECKING:  # annotations only: each module imports the engines it declares
    from hpcrl.models.actor import ActorCritic

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


class ActingEngine(Protocol):
    """What an off-policy collector needs of the engine of its acting policy: actions for a
    group of envs, asked for and then taken, and what the engine carries between steps
    for each env (nothing, for a policy that is one forward of the observations; a
    planner's plans and noise streams), reset where an episode ends and kept in the
    collector's checkpoint."""

    def sync(self) -> None:
        """Pick up the policy's current weights."""
        ...

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """The policy's actions for observations ``obs`` ``[B, ...]`` (drawn with ``noise``
        where the policy samples)."""
        ...

    def submit_act(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None
                   ) -> None:
        """Ask for :meth:`act` of ``group``'s rows (one request of a group at a time)."""
        ...

    def act_result(self, group: int) -> np.ndarray:
        """The actions asked for ``group`` (valid until its next request)."""
        ...

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Start afresh what the envs ``cols`` that ``done`` marks carry (their episode
        ended)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What the engine carries between steps, for the collector's checkpoint."""
        ...

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Restore :meth:`state_dict`; the envs' own parts only where ``envs_restored``."""
        ...


class QValueEngine(ActingEngine, Protocol):
    """The engine of a policy that acts through a Q-network (an algorithm declaring
    ``acting_q_values``): its values let a collector compute TD errors."""

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, ``[B, num_actions]``."""
        ...


class ActsAtOnce:
    """``submit_act`` / ``act_result`` of an off-policy engine that computes in this
    process: the actions are chosen when asked for, kept until taken; and, for an engine
    that carries nothing between steps, nothing to reset or checkpoint."""

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

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Nothing carried between steps: nothing to reset."""

    def state_dict(self) -> dict[str, Any]:
        """``{}``: nothing carried between steps."""
        return {}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Nothing to restore."""


@dataclass(frozen=True)
class ActedEnvs:
    """The envs an engine acts for on a collector: global envs ``env_offset ..``
    (``num_envs`` of them) of a job seeded ``seed``, in ``groups`` (slices of them; empty:
    one group of all). What an engine that keeps per-env state (a planner's plans and
    noise streams) is built for; an engine that is one forward of the observations needs
    none of it."""

    seed: int
    env_offset: int
    num_envs: int
    groups: Sequence[slice] = ()


class ActingModule(Protocol):
    """A policy module that declares how it acts: what :func:`make_engine` reads."""

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None) -> Any:
        """The engine that evaluates this module (``compile``: under torch.compile where it
        acts by torch, an inference rank's under ``train.compile``; ``envs``: the envs it
        acts for on a collector, None on an inference rank)."""
        ...


# an ActorCritic is an nn.Module too: the first overload is the more specific, as at run time
@overload
def make_engine(module: ActorCritic,  # type: ignore[overload-overlap]
                compile: bool = False, envs: ActedEnvs | None = None,
                rows_alone: bool = False) -> PolicyEngine:
    """An actor-critic's engine: rollouts' actions, log-probs, values and states."""


@overload
def make_engine(module: nn.Module, compile: bool = False, envs: ActedEnvs | None = None,
                rows_alone: bool = False) -> ActingEngine:
    """An off-policy acting policy's engine: actions for transition chunks."""


def make_engine(module: nn.Module, compile: bool = False, envs: ActedEnvs | None = None,
                rows_alone: bool = False) -> PolicyEngine | ActingEngine:
    """The engine that evaluates ``module``, as its class declares it
    (:meth:`ActingModule.acting_engine`): the built-ins' in numpy where that is faster (a
    feedforward MLP on the CPU), else by torch (compiled when ``compile``); ``envs``: the
    collector's envs it acts for (a planner keeps their plans). ``rows_alone`` (a
    deterministic job): each row of a forward computed on its own, where the engine can
    (:func:`computes_rows_alone` says whether it does)."""
    declared = getattr(type(module), "acting_engine", None)
    if declared is None:
        raise TypeError(f"{type(module).__name__} declares no acting engine: give the class "
                        f"an acting_engine(compile, envs) method returning the engine that "
                        f"acts with it (hpcrl.models.acting.ActingModule; docs/components.md)")
    engine: PolicyEngine | ActingEngine = declared(module, compile, envs)
    if rows_alone and hasattr(engine, "rows_alone"):
        engine.rows_alone = True
    return engine


def computes_rows_alone(engine: Any) -> bool:
    """Whether ``engine`` computes every row of a forward on its own, so that a row's result
    does not depend on the rows beside it (an engine with a ``rows_alone`` switch, set: the
    numpy engine's). Other engines' forwards (torch's kernels, chosen by the batch's shape)
    round a row differently in batches of other sizes: a deterministic inference rank runs
    them over one request at a time."""
    return bool(getattr(engine, "rows_alone", False))
