"""An MPI job: this rank's role, its communicators, device and the shared components.

Built the same way on every rank from the config alone, so the ranks agree on the rank
table without exchanging it; communicators are made once, in the same order everywhere.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Optional

import torch

from hpcrl.build import env_spaces, make_actor, rollout_layout
from hpcrl.comm import split_by_role, world_comm
from hpcrl.config.schema import Config
from hpcrl.core.actor import ActorCritic
from hpcrl.core.envs import EnvSpaces
from hpcrl.core.rollout import RolloutLayout
from hpcrl.runtime.devices import node_local_rank, pick_device
from hpcrl.scheme import COLLECTOR, UPDATER, WORKER, RankRole, assign_roles, required_world_size

LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS",
                      "PMIX_SIZE")


def launched_size(environ: dict[str, str] | None = None) -> int:
    """World size the launcher announced in the environment (1 when none did).

    ``SLURM_NTASKS`` counts only inside a job step (``srun``), not in a batch script.
    """
    env = os.environ if environ is None else environ
    for var in LAUNCHER_SIZE_VARS:
        if var == "SLURM_NTASKS" and "SLURM_STEP_ID" not in env:
            continue
        value = env.get(var, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def wants_mpi(config: Config) -> bool:
    """Whether this process is one rank of several (or its scheme needs several)."""
    return required_world_size(config.scheme) > 1 or launched_size() > 1


@dataclass
class MpiJob:
    """Everything a rank needs to know about the job it is part of."""

    config: Config
    world: Any
    role: RankRole
    table: list[RankRole]
    learners: Any            # communicator of the updater and gradient workers (None elsewhere)
    gradient: Any            # communicator of the gradient workers (None elsewhere)
    device: torch.device
    spaces: EnvSpaces

    @property
    def rank(self) -> int:
        return self.role.rank

    @property
    def is_leader(self) -> bool:
        """Rank 0 logs, checkpoints and decides when to stop."""
        return self.role.rank == 0

    def describe(self) -> str:
        """The role in words, for error reports."""
        r = self.role
        if r.role == UPDATER:
            return "updater"
        if r.role == WORKER:
            return f"gradient worker {r.group}" + (" + collector" if r.collects else "")
        return f"collector of gradient worker {r.group}"

    def ranks(self, role: str, group: Optional[int] = None) -> list[int]:
        return [r.rank for r in self.table if r.role == role and (group is None or r.group == group)]

    @property
    def workers(self) -> list[int]:
        return self.ranks(WORKER)

    @property
    def my_collectors(self) -> list[int]:
        return self.ranks(COLLECTOR, self.role.group)

    @property
    def total_envs(self) -> int:
        return sum(r.num_envs for r in self.table)

    def new_actor(self, device: Optional[torch.device] = None) -> ActorCritic:
        actor = make_actor(self.config, self.spaces)
        return actor if device is None or device.type == "cpu" else _to_device(actor, device)

    def layout(self) -> RolloutLayout:
        return rollout_layout(self.config, self.spaces, self.config.env.num_envs)


def _to_device(actor: ActorCritic, device: torch.device) -> ActorCritic:
    from hpcrl.core.flat import contiguous_parameters

    actor = actor.to(device)
    actor.__dict__.pop("_hpcrl_flat_params", None)
    actor.__dict__.pop("_hpcrl_params", None)
    contiguous_parameters(actor)
    return actor


def build_job(config: Config) -> MpiJob:
    """This rank's job; exits every rank with status 2 when the world size is wrong."""
    world = world_comm()
    size, rank = world.Get_size(), world.Get_rank()
    try:
        table = assign_roles(size, config.scheme, config.env.num_envs)
    except ValueError as err:
        if rank == 0:
            print(f"hpcrl: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
    role = table[rank]
    learners = split_by_role(world, 0 if role.learner else 1, rank)
    gradient = split_by_role(world, 0 if role.role == WORKER else 1, rank)
    requested = config.train.device if role.learner else config.scheme.collector_device
    device = pick_device(requested, node_local_rank())
    return MpiJob(config, world, role, table, learners if role.learner else None,
                  gradient if role.role == WORKER else None, device, env_spaces(config))
