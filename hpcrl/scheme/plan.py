"""The rank table of a config, as text for people and JSON for scripts (``hpcrl plan``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hpcrl.algorithms import algorithm_capabilities, algorithm_type
from hpcrl.algorithms.family import AgentSections
from hpcrl.algorithms.own_section import epsilon_keys
from hpcrl.envs.multiagent.play_modes import agents_summary
from hpcrl.models.epsilon import collector_epsilon
from hpcrl.scheme.presets import PRESETS
from hpcrl.scheme.topology import (
    INFERENCE,
    RankRole,
    assign_roles,
    collecting_ranks,
    describe,
    required_world_size,
)
from hpcrl.sections.schema import Config, SchemeConfig


def role_device_key(config: Config, role: RankRole) -> tuple[str, str]:
    """The config key that sets this role's device, and what it asks for: ``train.device``
    for learners, ``scheme.inference_device`` for inference ranks (``auto``: the CPU for
    an algorithm that declares its acting policy is served in numpy, not on a device),
    ``scheme.collector_device`` for collectors."""
    if role.learner:
        return "train.device", config.train.device
    if role.role == INFERENCE:
        requested = config.scheme.inference_device
        acts_on_device = algorithm_type(config.algo.name).acts_on_device
        if not acts_on_device and requested.strip().lower() == "auto":
            requested = "cpu"
        return "scheme.inference_device", requested
    return "scheme.collector_device", config.scheme.collector_device


def rank_device(config: Config, role: RankRole) -> str:
    """Where a rank computes: gradient ranks on the learner device, inference ranks and
    collectors on theirs."""
    return role_device_key(config, role)[1]


def rank_table(config: Config) -> list[RankRole]:
    """Every rank's role for ``config``'s scheme, at the world size it requires."""
    s = config.scheme
    return assign_roles(required_world_size(s), s, config.env.num_envs)


def exploration_epsilon(config: Config, role: RankRole) -> float | None:
    """The fixed epsilon of a collecting rank under Ape-X's per-collector schedule, or None."""
    r = epsilon_keys(config.algo)
    if not (r is not None and r.per_collector_eps and role.collects):
        return None
    n = collecting_ranks(config.scheme)
    return collector_epsilon(role.env_offset // config.env.num_envs, n, r.collector_eps_base,
                             r.collector_eps_alpha)


def agent_summary(config: Config) -> str:
    """The agent in words: the algorithm and what the scheme does with its data (what it
    learns from, as its class's declared family says it)."""
    cls = algorithm_type(config.algo.name)
    sections = AgentSections(config.algo, config.scheme, config.replay, config.env)
    return cls.family.summary(sections, cls)


def plan_json(config: Config) -> dict[str, Any]:
    """The plan as JSON-ready data (``hpcrl plan --json``): world size, the scheme's summary,
    agent and transport, total envs, and per rank its role, device, envs and epsilon."""
    s = config.scheme
    ranks = []
    for r in rank_table(config):
        d = r.to_dict()
        d["device"] = rank_device(config, r)
        d["envs"] = [r.env_offset, r.env_offset + r.num_envs] if r.collects else []
        eps = exploration_epsilon(config, r)
        if eps is not None:
            d["epsilon"] = eps
        ranks.append(d)
    total_envs = sum(r.num_envs for r in rank_table(config))
    game = agents_summary(config.env)  # a multi-agent env.id: how its agents are played
    return {"world_size": required_world_size(s), "preset": s.preset, "summary": describe(s),
            "agent": agent_summary(config),
            "capabilities": {**asdict(algorithm_capabilities(config.algo.name)),
                             "summary": algorithm_capabilities(config.algo.name).summary()},
            "collection": s.collection,
            "gradients": s.gradients, "update": s.update, "total_envs": total_envs,
            "transport": transport_summary(s), "ranks": ranks,
            **({"game": game} if game is not None else {})}


def transport_summary(scheme: Any) -> str:
    """How the collectors' per-step exchanges travel under ``scheme.transport``, in words
    (which pairs share a node is known only once the job runs: rank 0 prints it then)."""
    if scheme.collectors_per_worker == 0:
        return "none: every gradient worker collects its own rollouts"
    what = "rollouts" + (" and acting" if scheme.inference_ranks else "")
    lz4 = ", messages lz4-compressed (scheme.compress=lz4)" if scheme.compress == "lz4" else ""
    if scheme.transport == "messages":
        return f"{what} as MPI messages (scheme.transport=messages){lz4}"
    across = ("refused across nodes" if scheme.transport == "shared"
              else "MPI messages across nodes")
    return (f"{what} through shared memory between ranks of one node, {across} "
            f"(scheme.transport={scheme.transport}){lz4}")


def _ranks(ranks: tuple[int, ...]) -> str:
    return ",".join(map(str, ranks)) if ranks else "-"



def preset_label(s: SchemeConfig) -> str:
    """The preset's name, or, where the config changed the topology it sets, what changed
    (a plan of 2 gradient workers must not read as 'serial')."""
    changed = [key for key, value in PRESETS.get(s.preset, {}).items()
               if not isinstance(value, dict) and getattr(s, key, value) != value]
    if not changed:
        return s.preset
    return f"custom (preset {s.preset}, {', '.join(changed)} changed)"

def plan_text(config: Config, notes: Sequence[str] = ()) -> str:
    """The plan as text for people (``hpcrl plan``): the scheme's summary lines, the
    caller's ``notes`` (``hpcrl plan`` adds what a lost collector does on this machine's
    MPI: :func:`hpcrl.slurm.survival.lost_collector_notes`), then a table of the ranks."""
    info = plan_json(config)
    s = config.scheme
    lines = [f"scheme {preset_label(s)}: {info['summary']}",
             f"collection {s.collection}, gradients {s.gradients}, update {s.update}"
             + (f", all-reduce {s.allreduce}" if s.update == "decentralized"
                and s.gradient_workers > 1 else ""),
             f"agent: {info['agent']}",
             f"algorithm: {info['capabilities']['summary']}",
             f"world size: {info['world_size']}   "
             f"(mpiexec -n {info['world_size']} hpcrl train ...)",
             f"envs: {info['total_envs']} in all, {config.env.num_envs} per collecting rank",
             *([f"game: {info['game']}"] if info.get("game") else []),
             f"transport: {info['transport']}",
             *notes, "",
             f"{'rank':>4}  {'role':<16} {'group':>5}  {'feeds':<10} {'fed by':<12} "
             f"{'device':<7} envs"]
    for r in rank_table(config):
        envs = f"{r.env_offset}-{r.env_offset + r.num_envs - 1}" if r.collects else "-"
        group = "-" if r.group < 0 else str(r.group)
        eps = exploration_epsilon(config, r)
        lines.append(f"{r.rank:>4}  {r.role:<16} {group:>5}  {_ranks(r.feeds):<10} "
                     f"{_ranks(r.fed_by):<12} {rank_device(config, r):<7} {envs}"
                     + (f"  epsilon {eps:.4f}" if eps is not None else ""))
    return "\n".join(lines)
