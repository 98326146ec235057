"""One member of a population, trained from its start (or its last checkpoint) to its
budget: :func:`train_member`.

A population lives in one directory (:class:`~hpcrl.runtime.population_dir.PopulationDir`:
``pbt-config.yaml``, a run directory per member, the exchange in ``population/``).
Member ``k`` trains the population's config with seed ``seed + k`` and, the first time, the
values of ``pbt.mutate``'s keys drawn from their ranges by the population's seed and ``k``
(so the same population, with or without exploit-and-explore, starts alike). Its run's
writer hands every interval's checkpoint to a :class:`~hpcrl.population.member_hook.MemberHook`.
When the member copies a leader, its roles end after the update that was being trained
(that update is dropped); its checkpoint takes the leader's weights and normalisation
statistics and the leader's optimiser state (:func:`adopt_state`; its own counters, episodes,
envs and schedule progress stay), its config the mutated values, and the run goes on from
it in the same process. A member that finds its checkpoint (a requeue, a second start of the
population) resumes from it with the values its own ``config.yaml`` holds.
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from hpcrl.comm.world import SelfComm
from hpcrl.config.loader import dump_yaml, from_dict, read_yaml, to_dict
from hpcrl.config.validate_league import population_league_problem
from hpcrl.errors import ConfigError
from hpcrl.placement.job_run import JobRun, prepare
from hpcrl.placement.serial_run import resume_config
from hpcrl.population.explore import initial_values
from hpcrl.population.member import Member
from hpcrl.population.member_hook import MemberHook
from hpcrl.population.settings import check_settings
from hpcrl.population.workspace import write_text_atomic
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint, save_atomic
from hpcrl.runtime.population_dir import PopulationDir
from hpcrl.runtime.run_dir import RunDir, write_run_file
from hpcrl.sections.pbt_section import PbtConfig
from hpcrl.sections.schema import Config

__all__ = ["MUTABLE_SECTIONS", "adopt_state", "check_population", "hyperparameters",
           "population_config", "train_member", "with_values"]

# the sections whose real-valued keys a member may change as it goes on: the learning rule's
# (env, network, budget and placement keys would make it another run)
MUTABLE_SECTIONS = ("algo", "replay", "rnd")


def population_config(root: Path, config: Config | None) -> Config:
    """The config of the population in ``root``: ``config`` (checked) on its first start,
    written to ``pbt-config.yaml`` for every member; afterwards the one written, which
    ``config`` (None: given none) must equal, so that every member trains one config."""
    path = PopulationDir(root).config_path
    if not path.is_file():
        if config is None:
            raise ConfigError(f"{root} holds no population ({path.name} is missing): give "
                              "the config to start one")
        check_population(config)
        write_text_atomic(path, dump_yaml(config))  # (ranks of one launch write it alike)
        return config
    stored = from_dict(read_yaml(path), saved=True)
    if config is not None and to_dict(config) != to_dict(stored):
        raise ConfigError(f"the population in {root} trains another config ({path}); drop "
                          "CONFIG and --set to go on with it, or give another --run-dir")
    return stored


def _lookup(config: Config, key: str) -> Any:
    """The value of the dotted ``key`` in ``config`` (``KeyError`` when it names none)."""
    value: Any = to_dict(config)
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(key)
        value = value[part]
    return value


def hyperparameters(config: Config, settings: PbtConfig) -> dict[str, float]:
    """The values ``config`` trains with of every key of ``pbt.mutate``."""
    return {key: float(_lookup(config, key)) for key in sorted(settings.mutate)}


def with_values(config: Config, values: Mapping[str, float]) -> Config:
    """``config`` with ``values`` (dotted keys) set, checked as any config is."""
    data = to_dict(config)
    for key, value in values.items():
        *path, last = key.split(".")
        section = data
        for part in path:
            section = section[part]
        section[last] = float(value)
    return from_dict(data, saved=True)


def check_population(config: Config) -> PbtConfig:
    """The population's settings, checked before any member starts: the ``pbt`` section's
    own problems, and every key of ``pbt.mutate`` a real-valued key of the learning rule
    that this config trains with (each problem names the key and its fix)."""
    settings = check_settings(config.pbt)
    problems = []
    for key in sorted(settings.mutate):
        section = key.split(".", 1)[0]
        try:
            value = _lookup(config, key)
        except KeyError:
            problems.append(f"pbt.mutate.{key}: the config has no key {key} (`hpcrl config "
                            "show` lists them)")
            continue
        if section not in MUTABLE_SECTIONS:
            problems.append(f"pbt.mutate.{key}: only keys of {', '.join(MUTABLE_SECTIONS)} "
                            "change as a member goes on (an env, network, budget or placement "
                            "key would make it another run)")
        elif isinstance(value, bool) or not isinstance(value, float):
            problems.append(f"pbt.mutate.{key} is {type(value).__name__}-valued: PBT mutates "
                            "real-valued keys (algo.lr, algo.ent_coef, algo.gamma, "
                            "algo.ppo.clip_range, ...)")
    league = population_league_problem(config.env)
    if league is not None:
        problems.append(league)
    if problems:
        raise ConfigError("invalid pbt settings:\n  " + "\n  ".join(problems))
    try:  # a value in range may still be refused by the algorithm's checks
        with_values(config, {key: r.low for key, r in settings.mutate.items()})
        with_values(config, {key: r.high for key, r in settings.mutate.items()})
    except ConfigError as err:
        raise ConfigError(f"pbt.mutate: a value in a key's range is refused: {err}") from None
    return settings


def adopt_state(own_path: Path, leader_path: Path) -> None:
    """Make the checkpoint at ``own_path`` go on from the leader's at ``leader_path``: the
    leader's policy (weights and normalisation statistics) and optimiser state; this
    member's counters, progress rows, episodes, envs, generators and schedule progress.
    Replaced atomically: a kill leaves the old checkpoint or the new one."""
    own, leader = load_checkpoint(own_path), load_checkpoint(leader_path)
    own["policy"]["state_dict"] = leader["policy"]["state_dict"]
    mine, theirs = _algorithm_state(own, own_path), _algorithm_state(leader, leader_path)
    progress = mine.get("progress")
    mine.clear()
    mine.update(theirs)
    if progress is not None:
        mine["progress"] = progress  # (the schedules follow this member's env steps)
    save_atomic(own, own_path)


def _algorithm_state(state: dict[str, Any], path: Path) -> dict[str, Any]:
    """The algorithm's state (optimiser, schedule progress) in a one-process checkpoint: the
    updater's ``algorithm``, or its learner's (a replay learner's)."""
    updater = state.get("placement", {}).get("updater", {})
    for holder in (updater, updater.get("learner", {})):
        if isinstance(holder, dict) and isinstance(holder.get("algorithm"), dict):
            found: dict[str, Any] = holder["algorithm"]
            return found
    raise CheckpointError(f"{path} holds no algorithm state where a one-process run keeps it: "
                          "is it a checkpoint of a member of this population?")


def _first_config(config: Config, settings: PbtConfig, member: int) -> Config:
    """Member ``member``'s config at its start: seed ``seed + member``, and the values of
    ``pbt.mutate`` drawn from their ranges by the population's seed and the member."""
    rng = random.Random(f"hpcrl-pbt-start/{config.seed}/{member}")
    return with_values(replace(config, seed=config.seed + member),
                       initial_values(settings, rng))


def train_member(config: Config, root: Path, member: int,
                 console: IO[str] | None = None, world: Any = None) -> JobRun:
    """Train member ``member`` of the population of ``config`` in ``root`` to its budget
    (or to a stop signal); returns its last job run (preempted, evaluation). ``world``: the
    member's ranks (default: this process alone; MPI's world for a member of several
    ranks, every rank calling this): rank 0 compares and decides, and every rank goes on
    from the state it chose."""
    world = SelfComm() if world is None else world
    leads = world.Get_rank() == 0
    settings = check_population(config)
    population = PopulationDir(root)
    run = RunDir(population.member(member))
    resume = run.checkpoint_path.exists()
    seed = config.seed  # the population's: member k's own is seed + k
    config = resume_config(run, []) if resume else _first_config(config, settings, member)
    own = Member(settings, population.exchange, member, seed=seed) if leads else None
    while True:
        hook = (MemberHook(own, hyperparameters(config, settings), run.path)
                if own is not None else None)
        job_run = prepare(config, run.path, resume, console, world=world, interval=hook)
        if job_run.leader is not None and job_run.leader.writer.done and not job_run.several:
            job_run.finish_spent()  # (a requeued member whose budget was spent)
        else:
            job_run.train()
        decision = hook.decision if hook is not None else None
        values = (decision.hyperparameters if job_run.reloading and decision is not None
                  and decision.checkpoint is not None else None)
        values = world.bcast(values, root=0)  # every rank goes on, or none
        if values is None:
            return job_run
        config = with_values(config, values)
        if leads:
            assert decision is not None and decision.checkpoint is not None
            write_run_file("run config", run.config_path, dump_yaml(config))  # values first
            adopt_state(run.checkpoint_path, decision.checkpoint)
            if console is not None:
                print(f"hpcrl: member {member} goes on from member {decision.copy_from}'s "
                      f"state with {_values_text(values, settings)}", file=console, flush=True)
        world.Barrier()  # (the other ranks read the state rank 0 has just made)
        if job_run.preempted:  # a stop signal came before the reload: the copy is made in
            return job_run  # the checkpoint it wrote, and the requeued member goes on from it
        resume = True


def _values_text(values: Mapping[str, float], settings: PbtConfig) -> str:
    return ", ".join(f"{key}={values[key]:.4g}" for key in sorted(settings.mutate))
