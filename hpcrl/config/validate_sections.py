"""Value checks of the run's own algorithm section (``algo.ppo``, ``algo.dqn``, ...): each
key in its range, and the keys that only make sense with a capability the algorithm
declares. A section of another algorithm is refused as a whole before this
(:func:`hpcrl.config.algo_sections.unread_section_problem`); PPO+D's demonstration keys are
checked with the feature (:func:`hpcrl.config.validate_addons.check_demos`)."""
from __future__ import annotations

from collections.abc import Callable

from hpcrl.config.checks import algorithms_with, in_unit, positive, unread
from hpcrl.config.schema import Config
from hpcrl.core.algorithms import algorithm_capabilities, algorithm_type
from hpcrl.core.algorithms.own_section import own_section
from hpcrl.core.model_based.rewards import reward_spec_problem

# each check: (the key's leaf in the section, the test of its value given the key's full name)
Rule = tuple[str, Callable[[str, float], str | None]]


def _not_negative(key: str, value: float) -> str | None:
    return positive(key, value, strict=False)


def _clip(key: str, value: float | None) -> str | None:
    if value is not None and value <= 0:
        return f"config key '{key}' must be > 0 (or null for no clipping), got {value}"
    return None


def _below_one(key: str, value: float) -> str | None:
    if not 0.0 <= value < 1.0:
        return f"config key '{key}' must lie in [0, 1) (1 would never move), got {value}"
    return None


_NOISE: list[Rule] = [("noise_std", _not_negative), ("ou_theta", _not_negative),
                      ("ou_dt", positive)]
RULES: dict[str, list[Rule]] = {
    "ppo": [("num_epochs", positive), ("minibatch_size", positive), ("clip_range", positive),
            ("clip_range_vf", _clip)],
    "impala": [("clip_rho", _clip), ("clip_c", _clip)],
    "dqn": [("exploration_initial_eps", in_unit), ("exploration_final_eps", in_unit),
            ("exploration_fraction", in_unit), ("collector_eps_base", in_unit),
            ("collector_eps_alpha", _not_negative)],
    "ddpg": _NOISE,
    "td3": [*_NOISE, ("policy_delay", positive), ("target_policy_noise", _not_negative),
            ("target_noise_clip", _not_negative), ("n_critics", positive)],
    "sac": [("n_critics", positive), ("ent_coef_init", positive)],
    "mpo": [(key, positive) for key in ("epsilon", "epsilon_mean", "epsilon_std",
                                        "action_samples", "dual_lr", "init_temperature",
                                        "init_alpha", "n_critics")],
    "mpc": [*[(key, positive) for key in ("ensemble_size", "horizon", "candidates",
                                          "iterations", "elites", "sample_std")],
            ("cem_alpha", _below_one), ("beta", lambda key, value: in_unit(key, value, True)),
            ("gamma", _not_negative), ("weight_decay", _not_negative)],
}


def section_problems(c: Config) -> list[str]:
    """Every problem of the run's own algorithm section: the rules of the built-in it runs
    as for the keys it shares with that one's section, and the range rules its class
    declares (a plug-in's own keys: ``section_problem``)."""
    cls = algorithm_type(c.algo.name)
    name, kind = cls.section_name(), cls.runs_as()
    section = getattr(c.algo, name, None)
    if section is None:  # an algorithm with no keys of its own (a2c)
        return []
    problems = [rule(f"algo.{name}.{leaf}", getattr(section, leaf))
                for leaf, rule in RULES.get(kind, []) if hasattr(section, leaf)]
    problems.append(cls.section_problem(section))
    whole = WHOLE_CONFIG_RULES.get(kind)
    return [p for p in problems if p] + (whole(c) if whole else [])


def _dqn_problems(c: Config) -> list[str]:
    """Ape-X's keys need what they act through: a Q-network on prioritised replay for the
    collectors' priorities, epsilon-greedy exploration for the per-collector epsilons."""
    own, caps = own_section(c.algo), algorithm_capabilities(c.algo.name)
    problems = []
    if getattr(own, "initial_priorities", "max") == "collector" and not (caps.acting_q_values
                                                      and c.replay.prioritized):
        choices = algorithms_with(lambda caps: caps.acting_q_values)
        problems.append(f"config key 'algo.dqn.initial_priorities': 'collector' has the "
                        f"collectors compute TD errors with their Q-network, which needs "
                        f"algo.name={choices} and replay.prioritized=true (got algo.name="
                        f"{c.algo.name}, replay.prioritized={c.replay.prioritized}); set "
                        f"algo.dqn.initial_priorities=max")
    if getattr(own, "per_collector_eps", False) and caps.exploration != "epsilon-greedy":
        problems.append(f"config key 'algo.dqn.per_collector_eps' sets epsilon-greedy "
                        f"exploration, but algo.name={c.algo.name} explores by "
                        f"{caps.exploration}; set algo.dqn.per_collector_eps=false")
    return problems


#: The MPC planners that read each planner-specific key of ``algo.mpc``.
PLANNER_KEYS: dict[str, tuple[str, ...]] = {
    "elites": ("cem",), "cem_alpha": ("cem",), "beta": ("pddm",), "gamma": ("pddm",),
    "iterations": ("cem", "pddm"), "sample_std": ("cem", "pddm")}


def _mpc_problems(c: Config) -> list[str]:
    """A planner's keys set for another planner (they would be ignored), more elites than
    candidates, a reward function that cannot be loaded; the world model learns from
    one-step transitions sampled uniformly."""
    own, r = c.algo.mpc, c.replay
    problems: list[str] = []
    for key, readers in PLANNER_KEYS.items():
        if own.planner not in readers:
            planners = " or ".join(readers)
            problems += unread("algo.mpc", own, [key], f"algo.mpc.planner={planners}",
                               f"set algo.mpc.planner={planners}")
    if own.planner == "cem" and own.elites > own.candidates:
        problems.append(f"config key 'algo.mpc.elites' ({own.elites}) must not exceed "
                        f"algo.mpc.candidates ({own.candidates})")
    problem = reward_spec_problem(own.reward_fn)
    if problem:
        problems.append(problem)
    if r.n_step != 1:
        problems.append(f"config key 'replay.n_step' ({r.n_step}): algo.name={c.algo.name}'s "
                        f"world model predicts one step ahead from single transitions; set "
                        f"replay.n_step=1")
    if r.prioritized:
        problems.append(f"config key 'replay.prioritized': algo.name={c.algo.name} fits its "
                        f"world model to uniform samples of the replay (priorities follow TD "
                        f"errors, which it has none of); set replay.prioritized=false")
    return problems


#: Checks of a section against the rest of the config, by section.
WHOLE_CONFIG_RULES: dict[str, Callable[[Config], list[str]]] = {"dqn": _dqn_problems,
                                                                "mpc": _mpc_problems}
