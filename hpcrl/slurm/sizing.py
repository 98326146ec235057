"""Size a Slurm job from a config: task counts straight from the scheme's rank table.

The same function that gives ``hpcrl plan`` its table (:func:`hpcrl.scheme.plan.rank_table`)
decides how many tasks each job component gets, so a rendered job always starts with the
world size its scheme needs. The templates' shapes:

* ``sync``: one task per GPU, each a gradient worker that collects (preset ddppo);
* ``central``: one task per GPU, the updater first, then gradient workers (preset a3c);
* ``async``: component 0 one learner task per GPU (gradient workers, and an updater in a
  central scheme), then, with ``scheme.inference_ranks``, one GPU task per inference rank
  beside them (on CPU tasks instead with ``scheme.inference_device=cpu``); component 1 the
  CPU collector tasks (preset async-ppo).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpcrl.config.loader import ConfigError, load_config, merge, parse_overrides, read_yaml
from hpcrl.config.policy_configs import policy_configs
from hpcrl.envs.backends.envpool import uses_envpool
from hpcrl.scheme import INFERENCE, PRESETS, RankRole, apply_preset, describe
from hpcrl.scheme.plan import rank_table
from hpcrl.sections.schema import Config, EnvConfig, SchemeConfig, TrainConfig

TEMPLATE_PRESETS = {"sync": "ddppo", "async": "async-ppo", "central": "a3c"}
SIZE_KEYS = ("scheme.gradient_workers",)


@dataclass(frozen=True)
class Component:
    """One job component: its ranks, how they sit on nodes, and CPUs per task."""

    ranks: tuple[int, ...]
    cpus_per_task: int
    nodes: int | None = None           # None: Slurm places the tasks
    tasks_per_node: int | None = None

    @property
    def tasks(self) -> int:
        """The Slurm tasks of the component: one per rank."""
        return len(self.ranks)


@dataclass(frozen=True)
class JobShape:
    """What a rendered job runs: the scheme overrides, the scheme section it sizes, the
    learners' device (the script warns when GPUs stay idle) and its components. Only those
    parts of the config: the shape describes a job, it does not assemble one."""

    template: str
    scheme_sets: tuple[str, ...]
    scheme: SchemeConfig
    device: str
    table: tuple[RankRole, ...]
    components: tuple[Component, ...]
    policies: int = 1  # a league job's trained policies, each on an equal share of the ranks

    @property
    def world_size(self) -> int:
        """The ranks of the whole job."""
        return len(self.table)

    def summary(self) -> str:
        """One line, e.g. 'sync job: 2 nodes x 4 GPUs, 8 ranks: 8 gradient workers (...)'."""
        gpu = self.components[0]
        where = f"{gpu.nodes} node{'s' if gpu.nodes != 1 else ''} x {gpu.tasks_per_node} GPUs"
        for part in self.components[1:]:
            where += f" + {part.tasks} CPU tasks"
        scheme = self.scheme
        each = f"{self.policies} policies, each " if self.policies > 1 else ""
        return (f"{self.template} job: {where}, {self.world_size} ranks: "
                f"{each}{describe(scheme)} (scheme.preset={scheme.preset})")


def suggest_template(collectors_per_worker: int, central: bool) -> str:
    """The template whose shape fits a scheme."""
    if collectors_per_worker > 0:
        return "async"
    return "central" if central else "sync"


def _shape_problem(template: str, k: int, central: bool) -> str | None:
    if template == "sync" and (k or central):
        why = f"scheme.collectors_per_worker={k}" if k else "scheme.update=central"
        return ("the sync template runs gradient workers that collect their own rollouts and "
                f"all-reduce their gradients, but this scheme has {why}")
    if template == "central" and (k or not central):
        why = f"scheme.collectors_per_worker={k}" if k else "scheme.update=decentralized"
        return ("the central template runs an updater and gradient workers that collect their "
                f"own rollouts, but this scheme has {why}")
    if template == "async" and not k:
        return ("the async template runs CPU collector ranks next to the GPU learners, but "
                "this scheme has scheme.collectors_per_worker=0")
    return None


def _scheme_keys(config_path: str | None, sets: Sequence[str], template: str
                 ) -> dict[str, Any]:
    """The scheme section the job will run, before the job size is known: the config's keys
    over its preset (the template's preset when the config names none, i.e. 'serial').

    Read without validating the whole config, which only makes sense once the size is set.
    """
    data = read_yaml(config_path) if config_path else {}
    scheme = merge(data, parse_overrides(sets)).get("scheme") or {}
    if not isinstance(scheme, Mapping):
        raise ConfigError(f"config section 'scheme' must be a mapping, got {scheme!r}")
    default = SchemeConfig()
    preset = scheme.get("preset", default.preset)
    if preset == "serial":
        preset = TEMPLATE_PRESETS[template]
    if preset not in PRESETS:
        raise ConfigError(f"config key 'scheme.preset' must be one of {list(PRESETS)}, got "
                          f"{preset!r}")
    keys = apply_preset({**scheme, "preset": preset})
    keys.setdefault("collectors_per_worker", default.collectors_per_worker)
    keys.setdefault("update", default.update)
    if not isinstance(keys["collectors_per_worker"], int):
        raise ConfigError(f"config key 'scheme.collectors_per_worker' must be an integer, got "
                          f"{keys['collectors_per_worker']!r}")
    return keys


def _split_size(sets: Sequence[str]) -> tuple[list[str], list[str]]:
    """(--set items the job size decides, the other items)."""
    size: list[str] = []
    other: list[str] = []
    for pair in sets:
        (size if pair.partition("=")[0].strip() in SIZE_KEYS else other).append(pair)
    return size, other


def _check_size(size_sets: Sequence[str], workers: int, request: str) -> None:
    for pair in size_sets:
        if pair.partition("=")[2].strip() != str(workers):
            raise ConfigError(f"--set {pair.strip()} conflicts with the job size: {request} "
                              f"gives {workers} gradient workers; drop the --set (the job size "
                              f"decides it) or change --nodes / --gpus-per-node")


def _load_sized(config_path: str | None, sets: Sequence[str], scheme_sets: Sequence[str],
                size: str) -> Config:
    """The validated config of the sized job; an error the size causes says so."""
    try:
        return load_config(config_path, [*sets, *scheme_sets])
    except ConfigError as err:
        try:
            load_config(config_path, sets)
        except ConfigError as unsized:
            if str(unsized) == str(err):
                raise err from None  # the config's own mistake, whatever the size
        raise ConfigError(f"{size}, and then: {err}") from None


def gpu_inference_ranks(scheme: Mapping[str, Any]) -> int:
    """The inference ranks that take a GPU task of their own, beside the learners: all of
    them unless ``scheme.inference_device`` is 'cpu' (then they are CPU tasks, with the
    collectors)."""
    count = scheme.get("inference_ranks", 0)
    if not isinstance(count, int):
        raise ConfigError(f"config key 'scheme.inference_ranks' must be an integer, got "
                          f"{count!r}")
    device = str(scheme.get("inference_device", "auto")).strip().lower()
    return count if count > 0 and device != "cpu" else 0


def league_policies(config_path: str | None, sets: Sequence[str], template: str,
                    gpus: int) -> int:
    """How many trained policies share the job's GPUs evenly (a league job's ``policies``
    section: each a job of its own on ``gpus / policies`` GPU tasks); 1 without one. Refused,
    naming the fix, where the template cannot give each policy its share."""
    data = merge(read_yaml(config_path) if config_path else {}, parse_overrides(sets))
    policies = data.get("policies") or {}
    if not isinstance(policies, Mapping) or len(policies) < 1:
        return 1
    count = len(policies)
    if template == "async":
        raise ConfigError("a league job of several policies runs on the sync or central "
                          "template (each policy's ranks one block of GPU tasks); the async "
                          "template's GPU and CPU components would split each policy's "
                          "ranks: pick a sync scheme (ddppo) or central (a3c) for it")
    for name, value in policies.items():
        own = value if isinstance(value, Mapping) else {}
        keys = [k for k in own.get("set", {}) or {} if str(k).startswith("scheme.")]
        if own.get("ranks") is not None or keys:
            raise ConfigError(f"config key 'policies.{name}': the {template} template gives "
                              f"every policy {gpus} / {count} GPU tasks and sizes its scheme; "
                              f"drop its ranks and scheme keys ({keys or 'ranks'}), or launch "
                              f"the job with srun yourself")
    if gpus % count:
        raise ConfigError(f"the job trains {count} policies, each on an equal share of the "
                          f"GPUs, but asks for {gpus}: ask for a multiple of {count} GPUs")
    return count


def league_table(tables: list[list[RankRole]]) -> tuple[RankRole, ...]:
    """The rank table of a league job from each policy's own ``tables``, in turn: each
    policy's ranks numbered from where the last policy's end (as the job splits the launch,
    :func:`~hpcrl.config.policy_configs.rank_split`)."""
    table: list[RankRole] = []
    for own in tables:
        start = len(table)
        for role in own:
            table.append(replace(role, rank=role.rank + start,
                                 feeds=tuple(r + start for r in role.feeds),
                                 fed_by=tuple(r + start for r in role.fed_by),
                                 inference=role.inference + start if role.inference >= 0
                                 else role.inference))
    return tuple(table)


def cpus_for(train: TrainConfig, env: EnvConfig, role: RankRole) -> int:
    """CPUs a rank uses: its torch threads, plus one per env when envs run in subprocesses,
    or EnvPool's threads beyond the first (the rank's own thread waits while they step)."""
    threads = max(train.torch_threads, 1)
    if not role.collects:
        return threads
    if uses_envpool(env):
        return threads + max((env.envpool_threads or role.num_envs) - 1, 0)
    return threads + (role.num_envs if env.vectorization == "async" else 0)


def size_job(template: str, config_path: str | None, sets: Sequence[str], nodes: int,
             gpus_per_node: int, cpus_per_task: int | None = None) -> JobShape:
    """The job that runs ``config_path`` + ``sets`` on ``nodes`` x ``gpus_per_node`` GPUs
    with the template's shape; raises ConfigError naming the fix when it cannot."""
    if template not in TEMPLATE_PRESETS:
        raise ConfigError(f"unknown template kind '{template}'; use one of "
                          f"{', '.join(TEMPLATE_PRESETS)}")
    if nodes < 1 or gpus_per_node < 1:
        raise ConfigError("--nodes and --gpus-per-node must be >= 1")
    size_sets, sets = _split_size(sets)
    scheme = _scheme_keys(config_path, sets, template)
    preset, k = scheme["preset"], scheme["collectors_per_worker"]
    central = scheme["update"] == "central"
    problem = _shape_problem(template, k, central)
    if problem:
        fit = suggest_template(k, central)
        raise ConfigError(f"{problem}; render it with the {fit} template "
                          f"(hpcrl slurm render {fit} ...), or pick a scheme that fits: "
                          f"--set scheme.preset={TEMPLATE_PRESETS[template]}")
    gpus = nodes * gpus_per_node
    request = f"--nodes {nodes} x --gpus-per-node {gpus_per_node}"
    policies = league_policies(config_path, sets, template, gpus)
    on_gpus = gpu_inference_ranks(scheme)
    workers = gpus // policies - int(central) - on_gpus
    if workers < 1:
        beside = " and " if central and on_gpus else ""
        taken = (("the updater" if central else "") + beside
                 + (f"scheme.inference_ranks={on_gpus} inference ranks (a GPU each)"
                    if on_gpus else ""))
        raise ConfigError(f"{request} = {gpus} GPU{'s' if gpus > 1 else ''} "
                          f"{f'({gpus // policies} a policy) ' if policies > 1 else ''}leaves no "
                          f"gradient worker next to {taken}; ask for at least "
                          f"{gpus - workers + 1} GPUs"
                          + (", or put the inference ranks on CPU tasks with "
                             "scheme.inference_device=cpu" if on_gpus else ""))
    _check_size(size_sets, workers, request)
    scheme_sets = (f"scheme.preset={preset}", f"scheme.gradient_workers={workers}",
                   f"scheme.collectors_per_worker={k}")
    config = _load_sized(config_path, sets, scheme_sets, f"{request} makes "
                         f"scheme.gradient_workers={workers}")
    table = (tuple(rank_table(config)) if policies == 1 else
             league_table([rank_table(own) for own in policy_configs(config).values()]))
    gpu_ranks = tuple(r.rank for r in table
                      if r.learner or (on_gpus and r.role == INFERENCE))
    if gpu_ranks != tuple(range(gpus)):
        raise ConfigError(f"the rank table of this scheme ({describe(config.scheme)}) does "
                          f"not put one learner (or GPU inference rank) on each of the {gpus} "
                          f"GPUs first; check `hpcrl plan` for this config")

    def cpus(ranks: tuple[int, ...]) -> int:
        return cpus_per_task or max(cpus_for(config.train, config.env, table[r]) for r in ranks)

    gpu_part = Component(gpu_ranks, cpus(gpu_ranks), nodes, gpus_per_node)
    rest = tuple(r.rank for r in table if r.rank not in gpu_ranks)
    parts = (gpu_part,) if not rest else (gpu_part, Component(rest, cpus(rest)))
    return JobShape(template, scheme_sets, config.scheme, config.train.device, table, parts,
                    policies)
