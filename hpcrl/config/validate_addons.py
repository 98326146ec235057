"""The config checks of the add-ons an agent takes beside its algorithm: Random Network
Distillation (``rnd.*``), PPO+D's demonstrations (``algo.ppo.demos*``), hindsight replay
(``replay.her_*``) and the policy-loss add-ons (``algo.addons.*``). Each returns the
problems it finds, as :mod:`hpcrl.config.validate`'s checks do, which run them in their
list."""
from __future__ import annotations

import re
from collections.abc import Mapping

from hpcrl.algorithms import algorithm_capabilities
from hpcrl.algorithms.demo_replay import demo_slots
from hpcrl.config.checks import (
    algorithms_with,
    in_unit,
    positive,
    recomputed_from_observations,
    unread,
)
from hpcrl.scheme.topology import collecting_ranks
from hpcrl.sections.policy_addons import KL_MODES, KL_POLICY_KEYS
from hpcrl.sections.schema import Config


def check_rnd(c: Config) -> list[str]:
    """RND's keys: an on-policy agent on GAE batches with a feedforward actor, sane values,
    and no rnd.* key set while RND is off (it would be ignored)."""
    r = c.rnd
    if not r.enabled:
        return unread("rnd", r, list(vars(r)), "RND", "set rnd.enabled=true")
    if not algorithm_capabilities(c.algo.name).intrinsic_rewards:
        return [f"config key 'rnd.enabled': RND adds an intrinsic value head and advantages "
                f"to an on-policy agent on GAE batches; algo.name={c.algo.name} is not one. "
                f"Use algo.name=ppo or a2c (or a subclass of hpcrl.PPO / hpcrl.A2C)"]
    if c.actor.memory != "none":
        return [recomputed_from_observations(c, "rnd.enabled", "intrinsic values", "RND")]
    sizes = r.hidden_sizes
    checks = [positive("rnd.int_coef", r.int_coef, strict=False),
              positive("rnd.ext_coef", r.ext_coef, strict=False),
              in_unit("rnd.gamma", r.gamma, low_open=True),
              in_unit("rnd.gae_lambda", r.gae_lambda),
              positive("rnd.loss_coef", r.loss_coef),
              in_unit("rnd.update_proportion", r.update_proportion, low_open=True),
              positive("rnd.features", r.features), positive("rnd.clip_obs", r.clip_obs)]
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                            for s in sizes):
        checks.append(f"config key 'rnd.hidden_sizes' must be a non-empty list of positive "
                      f"integers, got {sizes!r}")
    if r.int_coef == 0 and r.enabled:
        checks.append("config key 'rnd.int_coef' is 0, so RND's bonus never reaches the "
                      "policy; set it > 0 or rnd.enabled=false")
    return [m for m in checks if m]


def check_demos(c: Config) -> list[str]:
    """PPO+D's keys: a PPO agent with a feedforward actor, replay slots that leave every
    collector a real env, no demos_* key without algo.ppo.demos. The file itself is checked when
    training starts (:func:`hpcrl.algorithms.demo_replay.demos_problem`), so a run whose file has
    moved still evaluates."""
    a = c.algo.ppo
    if not a.demos:
        return unread("algo.ppo", a, ["demos_fraction", "demos_own"], "PPO+D",
                      "set algo.ppo.demos to a demonstration file")
    if not algorithm_capabilities(c.algo.name).demonstrations:
        return [f"config key 'algo.ppo.demos': PPO+D replays demonstrations through PPO's "
                f"clipped loss; algo.name={c.algo.name} is not PPO. Use algo.name=ppo"]
    if c.actor.memory != "none":
        return [recomputed_from_observations(c, "algo.ppo.demos",
                                              "the replayed actions' log-probabilities",
                                              "demonstrations")]
    problems = [in_unit("algo.ppo.demos_fraction", a.demos_fraction, low_open=True),
                positive("algo.ppo.demos_own", a.demos_own, strict=False)]
    if a.demos_fraction >= 1:
        problems.append(f"config key 'algo.ppo.demos_fraction' ({a.demos_fraction}) leaves no env "
                        f"slot to step a real env; use a value below 1, such as 0.25")
    if any(problems):
        return [p for p in problems if p]
    # (the demonstration file itself is read where training starts: build.env_spaces)
    n = c.env.num_envs
    total = n * collecting_ranks(c.scheme)  # the job's env slots, as the collectors see them
    slots = demo_slots(total, a.demos_fraction)
    if not slots.any():
        return [f"config key 'algo.ppo.demos_fraction' ({a.demos_fraction}) gives none of the "
                f"job's {total} env slots to the demonstrations; raise it to at least "
                f"{1 / total:.3g} or use more envs"]
    full = [k for k in range(total // n) if slots[k * n:(k + 1) * n].all()]
    if full:
        return [f"config key 'algo.ppo.demos_fraction' ({a.demos_fraction}) makes every env of "
                f"the collecting process with envs {full[0] * n}-{full[0] * n + n - 1} a "
                f"replay slot; lower it or raise env.num_envs"]
    return []


def check_her(c: Config) -> str | list[str] | None:
    """Hindsight replay: a continuous off-policy agent on 1-step uniform replay, and her_k
    read only where it is on (the env itself is checked where it is probed,
    :func:`hpcrl.build.env_spaces`)."""
    r, name = c.replay, c.algo.name
    if r.her_strategy == "none":
        return unread("replay", r, ["her_k"], "hindsight replay",
                       "set replay.her_strategy=future, final or episode")
    if not algorithm_capabilities(c.algo.name).goal_relabelling:
        return (f"config key 'replay.her_strategy' ({r.her_strategy}) relabels the replay of "
                f"{algorithms_with(lambda caps: caps.goal_relabelling)}, got algo.name={name}; "
                f"use one of those, or set replay.her_strategy=none")
    if r.her_k < 1:
        return f"config key 'replay.her_k' must be >= 1, got {r.her_k}"
    if r.n_step != 1:
        return (f"config key 'replay.her_strategy' ({r.her_strategy}) relabels single "
                f"transitions, whose reward compute_reward gives for one step, and "
                f"replay.n_step={r.n_step} sums several; set replay.n_step=1")
    if r.prioritized:
        return (f"config key 'replay.her_strategy' ({r.her_strategy}) samples its rows "
                f"uniformly (a relabelled row's TD error belongs to its new goal, not to the "
                f"stored row); set replay.prioritized=false")
    streams = c.env.num_envs * collecting_ranks(c.scheme)
    if r.buffer_size < streams:
        return (f"config key 'replay.buffer_size' ({r.buffer_size}): hindsight replay keeps "
                f"one ring per env of the job, {streams} here, each buffer_size / {streams} "
                f"rows long; set replay.buffer_size to at least {streams} (a whole episode "
                f"per env, or more, is what relabelling needs)")
    return None


def check_policy_addons(c: Config) -> list[str]:
    """The policy-loss add-ons (``algo.addons.*``): an on-policy algorithm, weights >= 0, and
    well-formed ``kl_policies`` entries (the policies themselves are loaded and matched to
    the env where training starts, :func:`hpcrl.build.env_spaces`, so a run whose
    references have moved still evaluates)."""
    a = c.algo.addons
    if not a.enabled:
        return []
    if algorithm_capabilities(c.algo.name).learns_from != "rollouts":
        key = "kl_policies" if a.kl_policies else (
            "reward_predictor_coef" if a.reward_predictor_coef else "return_predictor_coef")
        return [f"config key 'algo.addons.{key}' adds a term to the loss of an on-policy "
                f"algorithm ({algorithms_with(lambda caps: not caps.replay)}); algo.name="
                f"{c.algo.name} learns from a replay; use one of those, or drop the key"]
    problems = [positive("algo.addons.reward_predictor_coef", a.reward_predictor_coef,
                         strict=False),
                positive("algo.addons.return_predictor_coef", a.return_predictor_coef,
                         strict=False)]
    problems += kl_policy_problems(a.kl_policies)
    if a.kl_policies and c.env.normalize_obs:
        problems.append("config key 'algo.addons.kl_policies': the rollouts hold observations "
                        "normalised by this run's running statistics, and the other policies "
                        "take them as the env gives them (each normalises with its own); set "
                        "env.normalize_obs=false to compare them on the same observations")
    return [p for p in problems if p]


def kl_policy_problems(entries: list) -> list[str]:
    """What is wrong with the entries of ``algo.addons.kl_policies`` (completed by
    :func:`~hpcrl.sections.policy_addons.completed_entry`)."""
    problems: list[str] = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        key = f"algo.addons.kl_policies[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"config key '{key}' must be a mapping such as {{policy: "
                            f"runs/teacher, mode: attract, coef: 1.0}}, got {entry!r}")
            continue
        unknown = sorted(set(entry) - set(KL_POLICY_KEYS))
        if unknown:
            problems.append(f"config key '{key}.{unknown[0]}' is unknown; an entry takes "
                            f"{', '.join(KL_POLICY_KEYS)}")
        if not isinstance(entry.get("policy"), str) or not entry["policy"]:
            problems.append(f"config key '{key}.policy' must name a run directory or a "
                            f"checkpoint file, got {entry.get('policy')!r}")
        mode = entry.get("mode")
        if mode not in KL_MODES:
            problems.append(f"config key '{key}.mode' must be 'attract' (stay near the "
                            f"policy) or 'repel' (move away from it), got {mode!r}")
        for leaf in ("coef", "max_kl"):
            if leaf not in entry:
                continue
            value = entry[leaf]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                fix = (" (mode: repel, not a negative coef, pushes away)"
                       if leaf == "coef" and isinstance(value, (int, float)) else "")
                problems.append(f"config key '{key}.{leaf}' must be a number > 0, got "
                                f"{value!r}{fix}")
        if "max_kl" in entry and mode == "attract":
            problems.append(f"config key '{key}.max_kl' is where repulsion stops pushing; "
                            f"an attracting entry has none; drop it, or set mode: repel")
        name = entry.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            problems.append(f"config key '{key}.name' names the progress.csv column kl_NAME "
                            f"and must be letters, digits and underscores, got {name!r}")
        elif name in names:
            problems.append(f"config key '{key}.name' ({name}) is taken by an earlier entry; "
                            f"give each entry its own name")
        names.add(name if isinstance(name, str) else "")
    return problems
