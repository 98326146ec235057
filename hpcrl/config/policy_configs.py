"""Each trained policy of a league job as a config of its own, and the ranks each trains on.

A job of the ``policies`` section trains every policy as a run of its own (its learner
group, collectors and inference ranks placed by its scheme on its share of the launch's
ranks), all of them in one league. :func:`policy_configs` makes each policy's config from
the job's: its name as ``env.league.player``; seed ``seed + 1,000,000 k`` for the k-th policy
(no two envs of the job share a seed, so each keeps its own match log); its role's league
keys (AlphaStar's: a main exploiter plays the mains' newest snapshots and a league exploiter
the whole league by PFSP; both join the league at a 0.7 win rate, or else after twice the
mains' ``env.league.snapshot_every``, and then start again, the main exploiter always, the
league exploiter with probability 0.25); then its own ``set``
keys. Each is checked as any config is, naming the policy, before any rank starts.
:func:`rank_split` shares the launch's ranks out.
"""
from __future__ import annotations

from typing import Any

from hpcrl.config.loader import from_dict, to_dict
from hpcrl.config.validate_policies import entry, role_of
from hpcrl.errors import ConfigError
from hpcrl.scheme import assign_roles
from hpcrl.sections.schema import Config

MAIN = "main"  # the one policy of a job without a policies section
SEED_STRIDE = 1_000_000  # between the first seeds of two policies' envs
EXPLOITER_THRESHOLD = 0.7  # AlphaStar's win rate at which an exploiter joins the league


def policy_names(config: Config) -> list[str]:
    """The job's trained policies, in the order of its ``policies`` section (``main`` alone
    without one)."""
    return list(config.policies) or [MAIN]


def role_keys(config: Config, name: str) -> dict[str, Any]:
    """The league keys the role of policy ``name`` sets (before its own ``set``)."""
    role = role_of(config, name)
    # an exploiter joins on its win rate, or else after twice the mains' interval
    slower = {"env.league.snapshot_every": 2 * config.env.league.snapshot_every}
    if role == "main_exploiter":
        mains = [n for n in config.policies if role_of(config, n) == "main"]
        return {"env.league.versus": mains, "env.league.opponents": "latest",
                "env.league.win_threshold": EXPLOITER_THRESHOLD, **slower,
                "env.league.reset_fraction": 1.0}
    if role == "league_exploiter":
        return {"env.league.opponents": "pfsp",
                "env.league.win_threshold": EXPLOITER_THRESHOLD, **slower,
                "env.league.reset_fraction": 0.25}
    return {}


def policy_config(config: Config, name: str) -> Config:
    """The config policy ``name`` of ``config``'s job trains (see the module); a
    :class:`~hpcrl.errors.ConfigError` names the policy where its config is refused."""
    data = to_dict(config)
    data["policies"] = {}
    index = policy_names(config).index(name)
    data["seed"] = config.seed + SEED_STRIDE * index
    sets = {"env.league.player": name, **role_keys(config, name),
            **dict(entry(config, name).get("set", {}) or {})}
    for dotted, value in sets.items():
        *path, last = str(dotted).split(".")
        section = data
        for part in path:
            if not isinstance(section.get(part), dict):
                raise ConfigError(f"config key 'policies.{name}.set.{dotted}': the config "
                                  f"has no key {dotted} (`hpcrl config show` lists them)")
            section = section[part]
        if last not in section and path[:1] != ["algo"]:
            raise ConfigError(f"config key 'policies.{name}.set.{dotted}': the config has "
                              f"no key {dotted} (`hpcrl config show` lists them)")
        section[last] = value
    try:
        return from_dict(data, saved=True)
    except ConfigError as err:
        raise ConfigError(f"policy '{name}' (config section 'policies'): {err}") from None


def policy_configs(config: Config) -> dict[str, Config]:
    """Every trained policy's config, by name (see :func:`policy_config`)."""
    return {name: policy_config(config, name) for name in policy_names(config)}


def rank_split(config: Config, world_size: int,
               configs: dict[str, Config] | None = None) -> list[tuple[str, int]]:
    """How many of the launch's ``world_size`` ranks each policy trains on, in order: its
    ``ranks``, the others sharing what is left evenly. A
    :class:`~hpcrl.errors.ConfigError` says why the launch cannot be shared so, or (given
    the policies' ``configs``) why a policy's scheme does not fit its share."""
    names = policy_names(config)
    fixed = {n: int(entry(config, n)["ranks"]) for n in config.policies
             if entry(config, n).get("ranks") is not None}
    rest = [n for n in names if n not in fixed]
    left = world_size - sum(fixed.values())
    if left < len(rest) or (not rest and left != 0) or (rest and left % len(rest)):
        given = ", ".join(f"{n}: {r}" for n, r in fixed.items())
        least = sum(fixed.values()) + len(rest)
        fix = (f"launch it on {least} ranks or more (`mpiexec -n {least} hpcrl train ...`, "
               f"srun -n {least} in a Slurm job)" if world_size < least
               else f"set policies.<name>.ranks to add up to {world_size}, or launch a "
                    f"multiple of {len(names)} ranks")
        raise ConfigError(
            f"the job trains {len(names)} policies ({', '.join(names)}), each on ranks of its "
            f"own, but it was launched on {world_size} rank(s)"
            f"{f' (policies.*.ranks: {given})' if given else ''}: {fix}")
    even = left // len(rest) if rest else 0
    split = [(n, fixed.get(n, even)) for n in names]
    for name, ranks in split if configs is not None else []:
        own = configs[name]  # type: ignore[index]
        try:
            assign_roles(ranks, own.scheme, own.env.num_envs)
        except ValueError as err:
            raise ConfigError(f"policy '{name}' trains on {ranks} rank(s) of the launch's "
                              f"{world_size} (policies.{name}.ranks): {err}") from None
    return split

