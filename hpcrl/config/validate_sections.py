"""Value checks of the run's own algorithm section (``algo.ppo``, ``algo.dqn``, ...): each
key in its range, by the rules its algorithm's class declares, and the keys that only make
sense with a capability the algorithm declares. A section of another algorithm is refused
as a whole before this (:func:`hpcrl.config.algo_sections.unread_section_problem`);
PPO+D's demonstration keys are checked with the feature
(:func:`hpcrl.config.validate_addons.check_demos`)."""
from __future__ import annotations

from hpcrl.algorithms import ALGORITHMS, algorithm_capabilities, algorithm_type
from hpcrl.algorithms.key_rules import rule_problems
from hpcrl.config.checks import algorithms_with
from hpcrl.sections.schema import Config


def section_problems(c: Config) -> list[str]:
    """Every problem of the run's own algorithm section: the range rules of the built-in it
    runs as (``section_rules``) for the keys its section holds, the rules its class states
    (``section_problem``: a plug-in's own keys, MPC's planner), and the section's keys that
    need a capability (:func:`capability_problems`)."""
    cls = algorithm_type(c.algo.name)
    name = cls.section_name()
    section = getattr(c.algo, name, None)
    if section is None:  # an algorithm with no keys of its own (a2c)
        return []
    problems = rule_problems(f"algo.{name}", section,
                             ALGORITHMS[cls.runs_as()].section_rules)
    problem = cls.section_problem(section)
    return problems + ([problem] if problem else []) + capability_problems(c, name, section)


def capability_problems(c: Config, name: str, own: object) -> list[str]:
    """The keys of the own section ``own`` (``algo.<name>``) whose feature needs what the
    algorithm declares: Ape-X's collector priorities a Q-network on prioritised replay,
    its per-collector epsilons epsilon-greedy exploration; and a world model
    (``predicts_observations``) learns from one-step transitions sampled uniformly."""
    caps = algorithm_capabilities(c.algo.name)
    problems = []
    if getattr(own, "initial_priorities", "max") == "collector" and not (caps.acting_q_values
                                                                        and c.replay.prioritized):
        choices = algorithms_with(lambda caps: caps.acting_q_values)
        problems.append(f"config key 'algo.{name}.initial_priorities': 'collector' has the "
                        f"collectors compute TD errors with their Q-network, which needs "
                        f"algo.name={choices} and replay.prioritized=true (got algo.name="
                        f"{c.algo.name}, replay.prioritized={c.replay.prioritized}); set "
                        f"algo.{name}.initial_priorities=max")
    if getattr(own, "per_collector_eps", False) and caps.exploration != "epsilon-greedy":
        problems.append(f"config key 'algo.{name}.per_collector_eps' sets epsilon-greedy "
                        f"exploration, but algo.name={c.algo.name} explores by "
                        f"{caps.exploration}; set algo.{name}.per_collector_eps=false")
    if caps.predicts_observations and c.replay.n_step != 1:
        problems.append(f"config key 'replay.n_step' ({c.replay.n_step}): algo.name="
                        f"{c.algo.name}'s world model predicts one step ahead from single "
                        f"transitions; set replay.n_step=1")
    if caps.predicts_observations and c.replay.prioritized:
        problems.append(f"config key 'replay.prioritized': algo.name={c.algo.name} fits its "
                        f"world model to uniform samples of the replay (priorities follow TD "
                        f"errors, which it has none of); set replay.prioritized=false")
    return problems
