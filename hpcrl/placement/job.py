"""An MPI job: this rank's role, its communicators, device and the shared components.

Built the same way on every rank from the config alone, so the ranks agree on the rank
table without exchanging it; communicators are made once, in the same order everywhere.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from hpcrl.algorithms import (
    Algorithm,
    algorithm_capabilities,
    make_algorithm,
    make_policy,
)
from hpcrl.algorithms.capabilities import Capabilities
from hpcrl.algorithms.family import FamilyWiring
from hpcrl.algorithms.own_section import own_section
from hpcrl.buffers.rollout import RolloutLayout
from hpcrl.build import env_groups, env_spaces, make_actor, make_storage, rollout_layout
from hpcrl.collection.collector import Collector, rollout_collector
from hpcrl.collection.transition_filler import TransitionSections, chunk_layout, stream_layout
from hpcrl.comm import split_by_role, world_comm
from hpcrl.comm.channel import Channel, channel_for
from hpcrl.comm.compression import PlainCodec, make_codec
from hpcrl.comm.faults import LOST, PeerInfo, gather_peers, survival_problem
from hpcrl.comm.node_memory import NodeMemory
from hpcrl.comm.world import SelfComm
from hpcrl.config.determinism import runs_deterministically
from hpcrl.config.loader import dump_yaml, to_dict
from hpcrl.config.validate import minibatches_per_epoch
from hpcrl.envs.scripted import collector_env_groups
from hpcrl.envs.vector import EnvSpaces
from hpcrl.exchange.node_transport import open_node_memory
from hpcrl.learning.replay_learner import make_replay
from hpcrl.learning.run_writer import WrittenConfig
from hpcrl.models.acting import make_engine
from hpcrl.models.actor import ActorCritic, actor_on
from hpcrl.numerics.reducer import Reducer
from hpcrl.placement.launch import (
    in_slurm_step,
    launched_rank,
    launched_size,
    lone_rank_problem,
    srun_command,
)
from hpcrl.placement.policies import JobPolicy, job_policies
from hpcrl.runtime.devices import DeviceError, node_local_rank, pick_device
from hpcrl.runtime.refused import exit_if_any_rank_refuses, exit_refused
from hpcrl.scheme import (
    COLLECTOR,
    EVALUATOR,
    INFERENCE,
    SPARE,
    UPDATER,
    WORKER,
    RankRole,
    assign_roles,
    required_world_size,
    spare_ranks,
)
from hpcrl.scheme.plan import role_device_key
from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.schema import Config, SchemeConfig, TrainConfig
from hpcrl.trained.reference_policies import attach_references

if TYPE_CHECKING:  # annotations only
    from hpcrl.placement.wiring.replay import ChunksJob
    from hpcrl.placement.wiring.replay_updates import ReplayJob
    from hpcrl.placement.wiring.rollout_updates import RolloutJob
    from hpcrl.placement.wiring.rollouts import RolloutsJob

LONE_RANK_GRACE_S = 20.0  # how long the other lone tasks leave task 0 to report the mismatch


def wants_mpi(config: Config) -> bool:
    """Whether this process is one rank of several (or its scheme needs several)."""
    return required_world_size(config.scheme) > 1 or launched_size() > 1


@dataclass
class RankJob:
    """Everything a rank needs to know about the job it is part of. Built here and in
    :mod:`~hpcrl.placement.job_run`, the job's assembly, alone: every role takes the parts
    it reads, as explicit arguments or as a protocol declared where it is used (a
    collector rank's ``CollectorJob``, a learner's ``LearnerJob``, a data path's
    ``RolloutJob`` or ``ReplayJob``...), which this class satisfies (mypy checks it where
    the assembly hands the job over, and in :func:`_serves_every_wiring`)."""

    config: Config
    world: Any
    role: RankRole
    table: list[RankRole]
    learners: Any            # communicator of the updater and gradient workers (None elsewhere)
    gradient: Any            # communicator of the gradient workers (None elsewhere)
    device: torch.device
    spaces: EnvSpaces
    # the node's shared window (rollouts, observations and actions between ranks of one
    # node; see :mod:`~hpcrl.exchange.node_transport`), None where messages carry all
    memory: NodeMemory | None = None
    transport_note: str | None = None  # the leader's: what goes through shared memory
    # the job goes on without a lost collector (asynchronous collection on an MPI that
    # survives a dead rank: hpcrl.comm.faults); every rank's host and pid where it does
    survives: bool = False
    survival_note: str | None = None  # the leader's start-up line about lost collectors
    peers: list[PeerInfo] | None = None
    # rank 0's spares and which rank holds each collector place (scheme.max_collector_restarts;
    # hpcrl.placement.mpi.spares), None elsewhere
    spares: Any = None

    @property
    def rank(self) -> int:
        """This process's rank in the world."""
        return self.role.rank

    @cached_property
    def channel(self) -> Channel:
        """This rank's point-to-point traffic with the job's other ranks (rank numbers of
        the world): every message of the roles goes through it."""
        return channel_for(self.world)

    @property
    def is_leader(self) -> bool:
        """Rank 0 logs, checkpoints and decides when to stop."""
        return self.role.rank == 0

    def in_role(self, role: RankRole) -> RankJob:
        """This job with ``role`` as this rank's role (a spare that takes a lost
        collector's place: the place's role, this rank's number)."""
        return replace(self, role=role)

    def describe(self) -> str:
        """The role in words, for error reports."""
        return describe_role(self.role)

    def describe_rank(self, rank: int) -> str:
        """Another rank's role in words (for the lines about lost ranks)."""
        return describe_role(self.table[rank])

    def say(self, line: str) -> None:
        """A line on this rank's standard error (the launcher forwards it)."""
        print(line, file=sys.stderr, flush=True)

    def ranks(self, role: str, group: int | None = None) -> list[int]:
        """The world ranks of role ``role`` (of group ``group`` when given), in rank order."""
        return [r.rank for r in self.table
                if r.role == role and (group is None or r.group == group)]

    @property
    def workers(self) -> list[int]:
        """The gradient workers' ranks."""
        return self.ranks(WORKER)

    @cached_property
    def header_only(self) -> frozenset[int]:
        """Subscribers that take a weights message's header alone (command, version and
        normaliser buffers), not its parameters: collectors whose inference rank acts for
        them, unless the algorithm declares that its collectors keep the parameters
        (:attr:`~hpcrl.algorithms.algorithm.Algorithm.collectors_keep_parameters`)."""
        if self.algorithm_type.collectors_keep_parameters:
            return frozenset()
        return frozenset(r.rank for r in self.table if r.role == COLLECTOR and r.inference >= 0)

    @cached_property
    def env_groups(self) -> int:
        """The groups every collecting rank of the job cuts its envs into
        (``scheme.env_groups``, resolved alike on every rank: an inference rank serves one
        slot per group of each of its collectors)."""
        remote = any(r.role == INFERENCE for r in self.table)
        return env_groups(self.config, remote)

    @cached_property
    def deterministic(self) -> bool:
        """Whether the job takes the deterministic paths (``train.deterministic``, ``auto``
        resolved: :func:`~hpcrl.config.determinism.runs_deterministically`): acting forwards
        that compute each env's row on its own (and with ``true``, an inference rank that
        runs other engines over one request at a time)."""
        return runs_deterministically(self.config)

    @property
    def total_envs(self) -> int:
        """The envs of the whole job, over every rank."""
        return sum(r.num_envs for r in self.table)

    def new_actor(self, device: torch.device | None = None) -> ActorCritic:
        """A freshly built actor of the job's config, moved to ``device`` unless that is the CPU."""
        return actor_on(make_actor(self.config, self.spaces), device)

    def new_algorithm(self, reducer: Reducer | None = None) -> Algorithm:
        """The job's algorithm, of either family, on the job's device (``reducer``: how its
        minibatch statistics cross the gradient workers), with the policies of its KL
        add-ons loaded there."""
        algorithm = make_algorithm(self.config, self.spaces, self.device, reducer)
        attach_references(algorithm, self.config.algo.addons, self.spaces, self.device)
        return algorithm

    def layout(self) -> RolloutLayout:
        """The rollout layout of one collector's ``env.num_envs`` envs (what every rank that
        exchanges rollouts builds alike)."""
        return rollout_layout(self.config, self.spaces, self.config.env.num_envs)

    @cached_property
    def codec(self) -> PlainCodec:
        """How big buffers cross as messages (``scheme.compress``)."""
        return make_codec(self.config.scheme.compress)

    def chunk_layout(self) -> Any:
        """The layout of the transition chunks a collector rank streams to a replay learner:
        ``algo.num_steps`` steps of each of its envs (plus what an n-step window flushes)."""
        s = self.spaces
        return stream_layout(self.config.replay, self.config.algo, s.obs_shape, s.action_shape,
                             self.num_envs, s.obs_format.dtype)

    def own_chunk_layout(self) -> Any:
        """The layout of the chunks a replay learner's own collector fills (one process): up
        to a training interval (``replay.train_freq``) or an update of steps per env."""
        s = self.spaces
        return chunk_layout(self.config.replay, self.config.algo, s.obs_shape, s.action_shape,
                            self.num_envs, s.obs_format.dtype)

    def new_storage(self) -> Any:
        """A gradient worker's rollout storage on this rank's device (GAE targets, or
        V-trace sequences: :func:`~hpcrl.build.make_storage`)."""
        return make_storage(self.config, self.spaces, self.device)

    @property
    def seed(self) -> int:
        """The run's seed (``seed``), which minibatch orders and collectors start from."""
        return self.config.seed

    def new_replay(self) -> Any:
        """The replay of the job's replay learner (``replay``: uniform, prioritised or
        hindsight), observations stored in the env's carried dtype, the episodes of the
        job's every env kept apart."""
        c, s = self.config, self.spaces
        return make_replay(c.replay, c.seed, c.algo.gamma, c.env, s.obs_shape, s.action_shape,
                           s.discrete, s.obs_format.dtype, s.obs_format,
                           streams=self.total_envs)

    def stream_layout(self) -> Any:
        """The layout of what a collector rank streams to its learner: the unit of the
        algorithm's family (:attr:`collection_unit`), as its wiring lays it out."""
        return self.wiring.stream_layout(self)

    # -- what the algorithm declares ---------------------------------------------------------
    @cached_property
    def policies(self) -> tuple[JobPolicy, ...]:
        """The policies the job trains and acts with (:mod:`~hpcrl.placement.policies`):
        one today, ``main``, learnt by every learner rank."""
        return job_policies(self.config.algo.name, self.table)

    @property
    def policy(self) -> JobPolicy:
        """The policy this rank's role serves (the job's one policy today)."""
        return self.policies[0]

    @property
    def algorithm_type(self) -> type[Algorithm]:
        """The class of the algorithm of this rank's policy (``algo.name``, built in or a
        plug-in): what differs between algorithms is declared on it and read through it."""
        cls: type[Algorithm] = self.policy.algorithm
        return cls

    @cached_property
    def capabilities(self) -> Capabilities:
        """What the job's algorithm declares it learns from and supports."""
        return algorithm_capabilities(self.config.algo.name)

    @property
    def collection_unit(self) -> str:
        """What one collection of a collector is, as the algorithm's family declares it
        (``"rollout"``, ``"chunk"``, or a plug-in family's own): the word the lines about
        collectors use."""
        return self.algorithm_type.family.unit

    @property
    def wiring(self) -> FamilyWiring:
        """What the family of this rank's policy runs on ranks (its learner's data path,
        collectors, stream layout and acting spec), found through the family its class
        declares (:attr:`~hpcrl.placement.policies.JobPolicy.wiring`)."""
        return self.policy.wiring

    def new_policy(self, device: torch.device | None = None) -> nn.Module:
        """A fresh acting policy of the job's algorithm (its class's ``policy_for``: the
        actor-critic, or an off-policy agent's own policy), moved to ``device`` unless that
        is None or the CPU: what an inference rank serves, and what sizes its slots."""
        return actor_on(make_policy(self.config, self.spaces), device)

    # -- the sections and counts the ranks read ----------------------------------------------
    @property
    def scheme(self) -> SchemeConfig:
        """The ``scheme`` section: how the roles map onto ranks and how they talk."""
        return self.config.scheme

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section: the budget, the learner device, compiling."""
        return self.config.train

    @property
    def replay(self) -> ReplayConfig:
        """The ``replay`` section (a replay learner's ratio and pacing)."""
        return self.config.replay

    @property
    def transition_sections(self) -> TransitionSections:
        """The sections a transition collector of this job reads (env, replay, algo, train
        and the seed)."""
        c = self.config
        return TransitionSections(c.env, c.replay, c.algo, c.train, c.seed)

    def written_config(self) -> WrittenConfig:
        """What rank 0's writer reads of the config (train, env, seed) and writes of it
        (its YAML text and dict)."""
        c = self.config
        return WrittenConfig(c.train, c.env, c.seed, dump_yaml(c), to_dict(c))

    @property
    def num_envs(self) -> int:
        """The envs of one collecting rank (``env.num_envs``)."""
        return self.config.env.num_envs

    @property
    def steps_per_collection(self) -> int:
        """Steps of each env in one rollout or chunk (``algo.num_steps``)."""
        return self.config.algo.num_steps

    @property
    def steps_per_update(self) -> int:
        """Env steps of the whole job in one update: ``algo.num_steps`` of every env."""
        return self.steps_per_collection * self.total_envs

    @cached_property
    def minibatches_per_epoch(self) -> int:
        """The minibatches each epoch over an on-policy update cuts (validated counts)."""
        return minibatches_per_epoch(self.config)

    @property
    def normalizes(self) -> bool:
        """Whether running moments travel with the gradients for the learners to sum: the
        observation or reward normalisers (``env.normalize_*``) or RND's (``rnd.enabled``)."""
        env = self.config.env
        return env.normalize_obs or env.normalize_reward or self.config.rnd.enabled

    def rollout_collector(self, envs: Any, actor: ActorCritic, engine: Any = None,
                          incarnation: int = 0) -> Collector[Any]:
        """The rollout collector of this rank's envs ``envs`` (its global env offset and the
        job's env count), acting with ``actor`` or through ``engine`` (an inference rank's
        link; default: ``actor``'s own engine, its rows computed alone where the job is
        deterministic); ``incarnation`` > 0 for a spare that took a lost collector's place."""
        if engine is None:
            engine = make_engine(actor, rows_alone=self.deterministic)
        return rollout_collector(envs, actor, self.config.env, self.config.algo.gamma,
                                 self.config.seed, self.role.env_offset, collector_id=self.rank,
                                 total_envs=self.total_envs, engine=engine,
                                 incarnation=incarnation)

    def collector_envs(self) -> Any:
        """This rank's envs (from its global env offset, in the job's env groups), made by
        the env layer, with the slots that play recordings where the algorithm declares
        some (PPO+D's demonstrations: its class's ``slot_play``)."""
        play = self.algorithm_type.slot_play(own_section(self.config.algo), self.total_envs)
        return collector_env_groups(self.config.env, self.role.env_offset, self.env_groups,
                                    play)


def describe_role(role: RankRole) -> str:
    """A rank's role in words, for error reports: "gradient worker 1 + collector"."""
    if role.role == UPDATER:
        return "updater"
    if role.role == WORKER:
        return f"gradient worker {role.group}" + (" + collector" if role.collects else "")
    if role.role == INFERENCE:
        return f"inference rank of gradient worker {role.group}"
    if role.role == SPARE:
        return "spare collector"
    if role.role == EVALUATOR:
        return "evaluator"
    return f"collector of gradient worker {role.group}"


def rank_table(world: Any, config: Config) -> list[RankRole]:
    """The scheme's rank table for this world; exits every rank with status 2 when the world
    has the wrong size. Rank 0 says why (the launcher's task 0 when the ranks are alone in
    worlds of size 1). Checked before anything the ranks must agree on."""
    size, rank = world.Get_size(), world.Get_rank()
    # a world of one given in-process (a Trainer inside an MPI rank) is no lone launched rank
    lone = None if isinstance(world, SelfComm) else lone_rank_problem(size)
    if lone is not None:
        if launched_rank() == 0:
            print(f"hpcrl: {lone}", file=sys.stderr, flush=True)
        else:  # task 0 may still be starting: an early exit here would make the launcher
            time.sleep(LONE_RANK_GRACE_S)  # kill it before it has said why
        exit_refused()
    try:
        return assign_roles(size, config.scheme, config.env.num_envs)
    except ValueError as err:
        problem = err
        if in_slurm_step():  # the advice names the srun of this allocation, not mpiexec
            try:
                assign_roles(size, config.scheme, config.env.num_envs, srun_command())
            except ValueError as in_slurm:
                problem = in_slurm
        if rank == 0:
            print(f"hpcrl: {problem}", file=sys.stderr, flush=True)
        exit_refused()


def _role_device(config: Config, role: RankRole) -> tuple[torch.device | None,
                                                          str | None]:
    """This role's device (see :func:`role_device_key`), or why it cannot have it."""
    key, requested = role_device_key(config, role)
    try:
        return pick_device(requested, node_local_rank(), key=key), None
    except DeviceError as err:
        return None, str(err)


def build_job(config: Config, world: Any = None, lost_ends_it: str | None = None) -> RankJob:
    """This rank's job over ``world`` (default: MPI's; a one-process
    :class:`~hpcrl.comm.world.SelfComm` for a run in this process alone); exits every rank
    with status 2 when the world size is wrong or a rank cannot have its device.
    ``lost_ends_it``: why a lost collector ends this job whatever its MPI (a policy's job in
    a league job of several, whose ranks all meet at the launch's end)."""
    world = world if world is not None else world_comm()
    table = rank_table(world, config)
    rank = world.Get_rank()
    role = table[rank]
    learners = split_by_role(world, 0 if role.learner else 1, rank)
    gradient = split_by_role(world, 0 if role.role == WORKER else 1, rank)
    device, problem = _role_device(config, role)
    exit_if_any_rank_refuses(world, problem, describe_role(role))
    assert device is not None  # no rank refused
    job = RankJob(config, world, role, table, learners if role.learner else None,
                 gradient if role.role == WORKER else None, device, env_spaces(config))
    _plan_survival(job, lost_ends_it)

    job.memory = open_node_memory(job)
    return job


def _plan_survival(job: RankJob, lost_ends_it: str | None = None) -> None:
    """Whether ``job`` goes on without a lost collector, and its start-up line: only
    asynchronous collection can (a synchronous learner waits for every collector), and only
    on an MPI that survives a dead rank (:func:`~hpcrl.comm.faults.survival_problem`).
    Collective: every rank learns its peers' hosts and pids (in any asynchronous job)."""
    s = job.config.scheme
    LOST.clear()
    if s.collection != "async" or not any(r.role == COLLECTOR for r in job.table):
        return
    job.peers = gather_peers(job.world)  # to name a lost collector's host either way
    problem = lost_ends_it or survival_problem()
    if problem is not None:
        idle = spare_ranks(s)
        job.survival_note = (f"a lost collector ends this job: {problem}"
                             + (f" (its {idle} spare rank{'s' if idle != 1 else ''} of "
                                f"scheme.max_collector_restarts stay idle)" if idle else ""))
        return
    job.survives = LOST.enabled = True
    spares = spare_ranks(s)
    comes_back = (f"a spare rank takes a lost collector's place, {spares} times at most "
                  f"(scheme.max_collector_restarts); past that it " if spares else "it ")
    job.survival_note = (f"a lost collector does not end this job (MPI fault tolerance): "
                         f"{comes_back}goes on down to scheme.min_collectors="
                         f"{s.min_collectors} live collector ranks, then checkpoints and "
                         f"stops with status 3")


def _serves_every_wiring(job: RankJob) -> tuple[RolloutJob, ReplayJob, RolloutsJob, ChunksJob]:
    """``job`` as the protocols of the built-in families' wirings and data paths, which
    reach it untyped (:class:`~hpcrl.algorithms.family.FamilyWiring` takes any job, so that
    a plug-in family declares its own): here mypy checks that a :class:`RankJob` is what
    each of them reads. Never called."""
    return job, job, job, job
