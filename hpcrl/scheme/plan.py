"""The rank table of a config, as text for people and JSON for scripts (``hpcrl plan``)."""
from __future__ import annotations

from typing import Any

from hpcrl.config.schema import Config
from hpcrl.scheme.topology import RankRole, assign_roles, describe, required_world_size


def rank_device(config: Config, role: RankRole) -> str:
    """Where a rank computes: gradient ranks on the learner device, collectors on theirs."""
    return config.train.device if role.learner else config.scheme.collector_device


def rank_table(config: Config) -> list[RankRole]:
    s = config.scheme
    return assign_roles(required_world_size(s), s, config.env.num_envs)


def plan_json(config: Config) -> dict[str, Any]:
    s = config.scheme
    ranks = []
    for r in rank_table(config):
        d = r.to_dict()
        d["device"] = rank_device(config, r)
        d["envs"] = [r.env_offset, r.env_offset + r.num_envs] if r.collects else []
        ranks.append(d)
    total_envs = sum(r.num_envs for r in rank_table(config))
    return {"world_size": required_world_size(s), "preset": s.preset, "summary": describe(s),
            "collection": s.collection, "gradients": s.gradients, "update": s.update,
            "total_envs": total_envs, "ranks": ranks}


def _ranks(ranks: tuple[int, ...]) -> str:
    return ",".join(map(str, ranks)) if ranks else "-"


def plan_text(config: Config) -> str:
    info = plan_json(config)
    s = config.scheme
    lines = [f"scheme {s.preset}: {info['summary']}",
             f"collection {s.collection}, gradients {s.gradients}, update {s.update}"
             + (f", all-reduce {s.allreduce}" if s.update == "decentralized"
                and s.gradient_workers > 1 else ""),
             f"world size: {info['world_size']}   (mpiexec -n {info['world_size']} hpcrl train ...)",
             f"envs: {info['total_envs']} in all, {config.env.num_envs} per collecting rank", "",
             f"{'rank':>4}  {'role':<16} {'group':>5}  {'feeds':<10} {'fed by':<12} "
             f"{'device':<7} envs"]
    for r in rank_table(config):
        envs = f"{r.env_offset}-{r.env_offset + r.num_envs - 1}" if r.collects else "-"
        group = "-" if r.group < 0 else str(r.group)
        lines.append(f"{r.rank:>4}  {r.role:<16} {group:>5}  {_ranks(r.feeds):<10} "
                     f"{_ranks(r.fed_by):<12} {rank_device(config, r):<7} {envs}")
    return "\n".join(lines)
