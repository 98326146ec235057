"""Acting engines: how a collector or an inference rank evaluates a policy, in numpy or in
torch, for every kind of policy hpcrl trains.

A collector asks its policy for actions once per env step, on a few observations. For the
small MLPs of classic control, torch's per-operation dispatch costs more than the
arithmetic, so on the CPU the networks are evaluated in numpy with the same weights
(float32; results agree with torch to rounding, which tests check). An engine holds *views*
of the module's weights where it can, and :meth:`Engine.sync` re-takes them after every load
that may have re-allocated them, or copies what it keeps as copies (a log std; the
actor-critic's policy and value networks, which its numpy engine stacks to run both in one
call a layer). torch serves image encoders, memory cores and other devices. In a
deterministic job (``train.deterministic``) an engine that can computes each row of a
forward on its own (``make_engine(..., rows_alone=True)``), so an env's results do not
depend on the rows beside it.

Every engine meets one protocol, :class:`Engine`, whatever the policy: it *steps* a batch
of observations into a :class:`Step` (the actions, and the log-probs, values and next
recurrent state where the policy has them, None where it has not), is asked for a group's
step (``submit``) before the step is taken (``result``), and keeps what it carries between
steps for each env (``reset`` where an episode ends, ``state_dict`` / ``load_state_dict``
for the collector's checkpoint; nothing, for a policy that is one forward of its
observations). What an engine can do beyond that is a sub-protocol: an actor-critic's
values (:class:`ValueEngine`, which rollouts need to bootstrap), a Q-network's Q-values
(:class:`QValueEngine`, which collector priorities need). So a collector, an inference rank
and a remote engine each treat every policy alike, and a job of several policies needs no
table of families to act with them. An engine that computes in this process gets
``submit``/``result`` and the carry-nothing defaults from :class:`ComputesHere`.

Every acting module declares its engine: its class's ``acting_engine(compile, envs)``
method (:class:`ActingModule`), which :func:`make_engine` calls, so a policy class of a
plug-in acts through the engine it declares, as the built-ins do. An actor-critic's engines
are in :mod:`hpcrl.models.actor_engines`; each off-policy policy's sits beside its class.
A plug-in engine of the older off-policy form (``act`` / ``submit_act`` / ``act_result``,
:class:`ActsAtOnce`) still works: :func:`make_engine` wraps it in
:class:`ActionsEngine`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, overload

import numpy as np
from torch import nn

if TYPE_CHECKING:  # annotations only: each module imports the engines it declares
    from hpcrl.models.actor import ActorCritic


class Step(NamedTuple):
    """What an engine's step gives for a batch of ``B`` rows: the actions, and where the
    policy has them their log-probs ``[B]``, values ``[B]`` (an actor-critic's, for
    rollouts) and the next flat recurrent state ``[B, state_size]`` (a recurrent actor's);
    None where it has not. A tuple, so ``actions, log_probs, values, state = step``."""

    actions: np.ndarray
    log_probs: np.ndarray | None = None
    values: np.ndarray | None = None
    state: np.ndarray | None = None


class Engine(Protocol):
    """What collectors and inference ranks need of every policy's engine. ``noise``: the
    per-env noise the collector drew for the step (None where the policy draws none);
    ``state``: the flat ``[B, state_size]`` float32 recurrent state of a recurrent actor,
    None otherwise; ``group``: the collector's group of envs the rows belong to."""

    def sync(self) -> None:
        """Pick up the policy's current weights."""
        ...

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The step of observations ``obs`` ``[B, ...]``: actions drawn with ``noise`` where
        the policy samples, and what else the policy gives (:class:`Step`)."""
        ...

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None,
               state: np.ndarray | None = None) -> None:
        """Ask for :meth:`step` of ``group``'s rows (one request of a group at a time), so
        that an engine whose forward runs elsewhere computes while the collector steps
        another group."""
        ...

    def result(self, group: int) -> Step:
        """The answer to ``group``'s request (valid until its next request)."""
        ...

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Start afresh what the envs ``cols`` that ``done`` marks carry (their episode
        ended): a planner's plans; nothing, for most engines."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What the engine carries between steps, for the collector's checkpoint."""
        ...

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Restore :meth:`state_dict`; the envs' own parts only where ``envs_restored``."""
        ...


class ValueEngine(Engine, Protocol):
    """The engine of a policy that also gives values (an actor-critic): what bootstraps a
    rollout cut short, or a truncated episode."""

    def value(self, obs: np.ndarray, state: np.ndarray | None = None,
              group: int = 0) -> np.ndarray:
        """Values ``[B]`` of ``obs`` (through ``group``'s link where another process acts)."""
        ...


class QValueEngine(Engine, Protocol):
    """The engine of a policy that acts through a Q-network (an algorithm declaring
    ``acting_q_values``): its values let a collector compute TD errors."""

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, ``[B, num_actions]``."""
        ...


class ComputesHere:
    """An engine that computes in this process: :meth:`submit` takes the step when asked
    for and :meth:`result` hands it over; and, unless the engine overrides them, it carries
    nothing between steps: nothing to reset or checkpoint. The engine defines ``sync`` and
    ``step``."""

    _answers: dict[int, Step]

    step: Callable[..., Step]  # the engine's own (:meth:`Engine.step`)

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None,
               state: np.ndarray | None = None) -> None:
        """Take the step of ``group``'s rows now."""
        if not hasattr(self, "_answers"):
            self._answers = {}
        self._answers[group] = self.step(obs, noise, state)

    def result(self, group: int) -> Step:
        """The step :meth:`submit` took for ``group``."""
        return self._answers.pop(group)

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """Nothing carried between steps: nothing to reset."""

    def state_dict(self) -> dict[str, Any]:
        """``{}``: nothing carried between steps."""
        return {}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """Nothing to restore."""


def needs_noise(noise: np.ndarray | None) -> np.ndarray:
    """``noise``, which a policy that samples its actions needs to act (a collector draws
    it per env, so that an action does not depend on where it was computed)."""
    if noise is None:
        raise ValueError("this policy samples its actions: step it with the noise the "
                         "collector drew")
    return noise


# -- the older off-policy form of a plug-in's engine --------------------------------------------
class ActsAtOnce:
    """The older form of an off-policy engine that computes in this process (``act``,
    ``submit_act`` / ``act_result``), kept for plug-in engines written against it:
    :func:`make_engine` wraps such an engine in :class:`ActsAdapter`. A new engine derives
    from :class:`ComputesHere` and defines ``step``."""

    _acted: dict[int, np.ndarray]

    act: Callable[..., np.ndarray]  # the engine's own: the actions of ``obs``

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


def acts_only(engine: Any) -> bool:
    """Whether ``engine`` is of the older off-policy form: ``act`` / ``submit_act`` /
    ``act_result``, no ``step`` / ``submit`` / ``result``."""
    return hasattr(engine, "submit_act") and not hasattr(engine, "submit")


class ActsAdapter:
    """An engine of the older off-policy form (:func:`acts_only`) as an :class:`Engine`:
    its actions as a step's, its requests as its ``submit_act`` / ``act_result``; what it
    carries between steps through its own ``reset`` / ``state_dict`` / ``load_state_dict``
    where it has them. Everything else (``q_values``, ``rows_alone``) is the engine's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        """The wrapped engine's attribute (``q_values``, ``rows_alone``, its own fields)."""
        if name == "inner":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def sync(self) -> None:
        """The engine's own."""
        self.inner.sync()

    def step(self, obs: np.ndarray, noise: np.ndarray | None = None,
             state: np.ndarray | None = None) -> Step:
        """The engine's ``act`` as a step (``state`` unused: no off-policy actor recurs)."""
        return Step(self.inner.act(obs, noise))

    def submit(self, group: int, obs: np.ndarray, noise: np.ndarray | None = None,
               state: np.ndarray | None = None) -> None:
        """The engine's ``submit_act``."""
        self.inner.submit_act(group, obs, noise)

    def result(self, group: int) -> Step:
        """The engine's ``act_result`` as a step."""
        return Step(self.inner.act_result(group))

    def reset(self, done: np.ndarray, cols: slice = slice(None)) -> None:
        """The engine's ``reset``, where it has one."""
        if hasattr(self.inner, "reset"):
            self.inner.reset(done, cols)

    def state_dict(self) -> dict[str, Any]:
        """The engine's ``state_dict``, where it has one (else ``{}``)."""
        return dict(self.inner.state_dict()) if hasattr(self.inner, "state_dict") else {}

    def load_state_dict(self, state: dict[str, Any], envs_restored: bool = True) -> None:
        """The engine's ``load_state_dict``, where it has one."""
        if hasattr(self.inner, "load_state_dict"):
            self.inner.load_state_dict(state, envs_restored)


# -- declaring and building an engine -------------------------------------------------------------
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
                rows_alone: bool = False) -> ValueEngine:
    """An actor-critic's engine: its steps carry log-probs and values, and it gives values."""


@overload
def make_engine(module: nn.Module, compile: bool = False, envs: ActedEnvs | None = None,
                rows_alone: bool = False) -> Engine:
    """Any other acting policy's engine."""


def make_engine(module: nn.Module, compile: bool = False, envs: ActedEnvs | None = None,
                rows_alone: bool = False) -> Engine:
    """The engine that evaluates ``module``, as its class declares it
    (:meth:`ActingModule.acting_engine`): the built-ins' in numpy where that is faster (a
    feedforward MLP on the CPU), else by torch (compiled when ``compile``); ``envs``: the
    collector's envs it acts for (a planner keeps their plans). ``rows_alone`` (a
    deterministic job): each row of a forward computed on its own, where the engine can
    (:func:`computes_rows_alone` says whether it does). An engine of the older off-policy
    form comes wrapped in :class:`ActsAdapter`, so every caller sees one :class:`Engine`."""
    declared = getattr(type(module), "acting_engine", None)
    if declared is None:
        raise TypeError(f"{type(module).__name__} declares no acting engine: give the class "
                        f"an acting_engine(compile, envs) method returning the engine that "
                        f"acts with it (hpcrl.models.acting.Engine; docs/components.md)")
    engine = declared(module, compile, envs)
    if rows_alone and hasattr(engine, "rows_alone"):
        engine.rows_alone = True
    wrapped: Engine = ActsAdapter(engine) if acts_only(engine) else engine
    return wrapped


def computes_rows_alone(engine: Any) -> bool:
    """Whether ``engine`` computes every row of a forward on its own, so that a row's result
    does not depend on the rows beside it (an engine with a ``rows_alone`` switch, set: the
    numpy engine's). Other engines' forwards (torch's kernels, chosen by the batch's shape)
    round a row differently in batches of other sizes: a deterministic inference rank runs
    them over one request at a time."""
    return bool(getattr(engine, "rows_alone", False))
