"""Value checks of a typed config: impossible values are caught before any work starts.

Each check returns the messages naming a key and the fix (one, a list, or None when the
config is usable); :func:`validate` reports every problem at once.
"""
from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable

from hpcrl.algorithms import (
    ALGORITHMS,
    algorithm_capabilities,
    algorithm_type,
    check_algorithm_kwargs,
)
from hpcrl.components.contracts import network_factory
from hpcrl.components.import_paths import PluginError, check_kwargs, is_import_path
from hpcrl.config.algo_sections import unread_section_problem
from hpcrl.config.checks import algorithms_with, in_unit, positive, unread
from hpcrl.config.determinism import check_deterministic
from hpcrl.config.validate_addons import (
    check_demos,
    check_her,
    check_policy_addons,
    check_rnd,
)
from hpcrl.config.validate_collection import check_compile, check_env_groups
from hpcrl.config.validate_league import check_league
from hpcrl.config.validate_policies import check_policies
from hpcrl.config.validate_restarts import check_env_restarts
from hpcrl.config.validate_sections import section_problems
from hpcrl.envs.make import wrapper_factory, wrapper_specs
from hpcrl.envs.vector import env_problem
from hpcrl.scheme.topology import (
    envs_per_gradient_step,
    gradient_step_factors,
    required_world_size,
    scheme_problem,
)
from hpcrl.sections.schema import Config

# a check gives the problem it found (None: none), or a list of them for a group of keys
Check = Callable[[Config], str | None | list[str]]


def total_envs(config: Config) -> int:
    """Envs whose steps one gradient step covers (see ``envs_per_gradient_step``)."""
    return envs_per_gradient_step(config.scheme, config.env.num_envs)


def _named_product(factors: list[tuple[str, int]]) -> str:
    """``a x b = 1000 x 4 = 4000``: a product with every factor named by its key."""
    total = math.prod(v for _, v in factors)
    if len(factors) == 1:
        return f"{factors[0][0]} = {total}"
    return (f"{' x '.join(k for k, _ in factors)} = {' x '.join(str(v) for _, v in factors)} "
            f"= {total}")


def update_envs(config: Config) -> str:
    """The envs of one update (one gradient step's batch), every factor named: the
    envs of a gradient step come from env.num_envs, a worker's collectors and, when
    gradients are synchronous, the workers."""
    return _named_product(gradient_step_factors(config.scheme, config.env.num_envs))


def rollout_product(config: Config) -> str:
    """``algo.num_steps x env.num_envs x ... = 1000 x 1 x 4 = 4000``: the samples of one
    update, every factor named."""
    return _named_product([("algo.num_steps", config.algo.num_steps),
                           *gradient_step_factors(config.scheme, config.env.num_envs)])


def minibatches_per_epoch(config: Config) -> int:
    """Minibatches per epoch: the samples of one gradient step's envs over PPO's minibatch
    (``algo.ppo.minibatch_size``); 1 for an algorithm that steps on whole rollouts."""
    if not algorithm_capabilities(config.algo.name).minibatched_epochs:
        return 1
    return max(config.algo.num_steps * total_envs(config) // config.algo.ppo.minibatch_size, 1)


def sequence_length(config: Config) -> int:
    """Steps of the sequences a recurrent actor's loss recomputes: ``algo.bptt_len``, or
    when it is 0 the longest that gives every PPO minibatch the same number of sequences of
    each env (the whole rollout for A2C and IMPALA); 0 when none does."""
    algo = config.algo
    if algo.bptt_len:
        return algo.bptt_len
    split = minibatches_per_epoch(config)
    return algo.num_steps // split if algo.num_steps % split == 0 else 0


def _check_plugins(c: Config) -> str | None:
    """A known algorithm or an importable plug-in that meets its contract, and keyword
    arguments that each plug-in takes (the network's own checks need the env's spaces and
    run in :func:`hpcrl.build.env_spaces`)."""
    name = c.algo.name
    known = list(ALGORITHMS)  # the registry as it is now
    if name not in known and not is_import_path(name):
        return (f"config key 'algo.name' must be one of {known} or the import path "
                f"'module:Class' of your own algorithm, got {name!r}")
    try:
        if is_import_path(name):
            algorithm_type(name)
        check_algorithm_kwargs(c.algo)
        if c.actor.network:
            if not algorithm_capabilities(c.algo.name).own_networks:
                return (f"config key 'actor.network' ({c.actor.network}): algo.name="
                        f"{c.algo.name}'s Q-networks and policies are built from "
                        f"actor.hidden_sizes and actor.encoder; a network of your own goes "
                        f"into the actor-critic of ppo, a2c or impala (or your subclass)")
            if c.actor.encoder != "mlp":
                return (f"config keys 'actor.network' and 'actor.encoder' "
                        f"({c.actor.encoder}) both name the first stage of the networks; "
                        f"keep one (actor.encoder=mlp with a network of your own)")
            check_kwargs(network_factory(c.actor.network), c.actor.network_kwargs,
                         "actor.network_kwargs", c.actor.network, fixed=1)
        elif c.actor.network_kwargs:
            return ("config key 'actor.network_kwargs' is for a network of your own "
                    "(actor.network='module:Class'); set actor.network or drop the kwargs")
        for path, kwargs in wrapper_specs(c.env):
            check_kwargs(wrapper_factory(path), kwargs, "env.wrappers", path, fixed=1)
    except PluginError as err:
        return str(err)
    return None


def _check_numbers(c: Config) -> list[str]:
    checks = [
        positive("env.num_envs", c.env.num_envs),
        positive("env.clip_obs", c.env.clip_obs),
        positive("env.clip_reward", c.env.clip_reward),
        positive("algo.num_steps", c.algo.num_steps),
        in_unit("algo.gamma", c.algo.gamma),
        in_unit("algo.gae_lambda", c.algo.gae_lambda),
        positive("algo.lr", c.algo.lr),
        positive("algo.ent_coef", c.algo.ent_coef, strict=False),
        positive("algo.vf_coef", c.algo.vf_coef, strict=False),
        positive("algo.max_grad_norm", c.algo.max_grad_norm, strict=False),
        positive("algo.optimizer_eps", c.algo.optimizer_eps),
        positive("train.total_env_steps", c.train.total_env_steps),
        positive("train.eval_episodes", c.train.eval_episodes, strict=False),
        positive("train.eval_max_episode_steps", c.train.eval_max_episode_steps, strict=False),
        positive("train.checkpoint_every", c.train.checkpoint_every),
        positive("train.checkpoint_every_s", c.train.checkpoint_every_s, strict=False),
        positive("train.eval_every", c.train.eval_every, strict=False),
        positive("train.keep_checkpoints", c.train.keep_checkpoints),
        positive("train.log_interval_s", c.train.log_interval_s),
        positive("train.torch_threads", c.train.torch_threads, strict=False),
    ]
    if c.train.eval_every > 0 and c.train.eval_episodes <= 0:
        checks.append(f"train.eval_every={c.train.eval_every} evaluates train.eval_episodes "
                      f"episodes each time, but that is 0; set train.eval_episodes >= 1 or "
                      f"drop train.eval_every")
    if c.scheme.evaluators > 0 and c.train.eval_every <= 0:
        checks.append(f"scheme.evaluators={c.scheme.evaluators} evaluates every "
                      f"train.eval_every env steps, but that is 0 (no evaluation during "
                      f"training); set train.eval_every (e.g. train.eval_every=10000) or drop "
                      f"scheme.evaluators")
    if c.train.wandb.project and importlib.util.find_spec("wandb") is None:
        checks.append('train.wandb.project is set but wandb is not installed: pip install '
                      'wandb (or pip install "hpcrl[wandb]"), or drop train.wandb.project')
    if (c.train.wandb.entity or c.train.wandb.group) and not c.train.wandb.project:
        checks.append("train.wandb.entity / group are set but train.wandb.project is empty: "
                      "name the project (train.wandb.project=...) to log to W&B")
    return [msg for msg in checks if msg]


def _check_actor(c: Config) -> str | None:
    sizes = c.actor.hidden_sizes
    image = c.actor.encoder != "mlp"
    if (not sizes and not image) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        what = "a list" if image else "a non-empty list"
        return (f"config key 'actor.hidden_sizes' must be {what} of positive integers, got "
                f"{sizes!r}")
    if c.actor.compute_dtype != "float32" and not image:
        return (f"config key 'actor.compute_dtype' ({c.actor.compute_dtype}) sets the number "
                f"format of the image encoders, and actor.encoder=mlp has none; set "
                f"actor.encoder=nature_cnn or impala_resnet, or leave actor.compute_dtype at "
                f"float32 (a network of your own can use torch.autocast in its forward)")
    if c.actor.encoder_init == "fixup" and (c.actor.network or c.actor.encoder != "impala_resnet"):
        what = (f"actor.network ({c.actor.network}) is your own" if c.actor.network
                else f"actor.encoder={c.actor.encoder} has none")
        return (f"config key 'actor.encoder_init' (fixup) initialises the residual blocks of "
                f"actor.encoder=impala_resnet, and {what}; set actor.encoder=impala_resnet "
                f"(without actor.network) or actor.encoder_init=default")
    if image and not algorithm_capabilities(c.algo.name).image_observations:
        choices = algorithms_with(lambda caps: caps.image_observations)
        return (f"config key 'actor.encoder' ({c.actor.encoder}): algo.name={c.algo.name}'s "
                f"policy and critics take vector observations through an MLP; use "
                f"actor.encoder=mlp, or one of {choices} for image observations")
    return positive("actor.features", c.actor.features)


def _check_memory(c: Config) -> str | None:
    """Memory keys: positive sizes, an on-policy algorithm, sequences that tile rollouts."""
    problem = (positive("actor.memory_size", c.actor.memory_size)
               or positive("actor.memory_layers", c.actor.memory_layers)
               or positive("algo.bptt_len", c.algo.bptt_len, strict=False))
    if problem:
        return problem
    if c.actor.memory == "none":
        defaults = {"algo": type(c.algo)(), "actor": type(c.actor)()}
        unread = [f"{section}.{key}" for section, key in (
                      ("algo", "bptt_len"), ("actor", "memory_size"), ("actor", "memory_layers"))
                  if getattr(getattr(c, section), key) != getattr(defaults[section], key)]
        if unread:
            return (f"config key '{unread[0]}' is read by recurrent actors only; set "
                    f"actor.memory=gru or lstm, or drop the key")
        return None
    if not algorithm_capabilities(c.algo.name).recurrent:
        choices = algorithms_with(lambda caps: caps.recurrent)
        return (f"config key 'actor.memory' ({c.actor.memory}): algo.name={c.algo.name} trains "
                f"from a replay of single transitions, which holds no recurrent state; use "
                f"actor.memory=none, or one of {choices} for a recurrent agent")
    steps, length = c.algo.num_steps, sequence_length(c)
    if length and steps % length:
        return (f"config key 'algo.bptt_len' ({length}) must divide algo.num_steps "
                f"({steps}): each rollout is cut into sequences of that length")
    split = minibatches_per_epoch(c)
    if not length or (steps // length) % split:
        fits = [steps // d for d in range(split, steps + 1, split) if steps % d == 0]
        hint = (f"set algo.bptt_len to one of {', '.join(map(str, fits))}" if fits
                else "use fewer minibatches (a larger algo.ppo.minibatch_size)")
        what = (f"algo.bptt_len={c.algo.bptt_len} gives {steps // length}"
                if c.algo.bptt_len else "no sequence length gives")
        return (f"config key 'algo.bptt_len': a recurrent PPO minibatch holds the same number "
                f"of whole sequences of every env, and {what} sequences per env of the "
                f"{steps}-step rollout that split into the {split} minibatches per epoch; "
                f"{hint}")
    return None


def _check_batch(c: Config) -> str | None:
    if not algorithm_capabilities(c.algo.name).minibatched_epochs:
        return None
    batch, size = c.algo.num_steps * total_envs(c), c.algo.ppo.minibatch_size
    if size > batch or batch % size:
        divisors = [d for d in range(1, batch + 1) if batch % d == 0]
        near = min(divisors, key=lambda d: abs(d - size))
        return (f"config key 'algo.ppo.minibatch_size' ({size}) must divide the "
                f"batch of one gradient step, {rollout_product(c)}; the nearest divisor is "
                f"{near}")
    if size % total_envs(c):
        return (f"config key 'algo.ppo.minibatch_size' ({size}) must be a multiple "
                f"of the number of envs of an update ({update_envs(c)}): every minibatch "
                f"holds the same "
                f"number of steps from each env, so the batch order does not depend on how "
                f"envs are spread over ranks")
    return None


def _check_budget(c: Config) -> str | None:
    per_update = c.algo.num_steps * total_envs(c)
    if c.train.total_env_steps < per_update:
        return (f"config key 'train.total_env_steps' ({c.train.total_env_steps}) is smaller than "
                f"the env steps of one update, {rollout_product(c)}; raise it, or lower one "
                f"of those")
    return None


def _check_device(c: Config) -> str | None:
    dev = c.train.device
    if dev not in ("auto", "cpu", "cuda") and not (dev.startswith("cuda:") and dev[5:].isdigit()):
        return (f"config key 'train.device' must be 'auto', 'cpu', 'cuda' or 'cuda:N', got "
                f"{dev!r}")
    if algorithm_capabilities(c.algo.name).replay and c.scheme.collector_device != "cpu":
        return (f"config key 'scheme.collector_device' ({c.scheme.collector_device}): "
                f"{c.algo.name}'s collectors act through a numpy copy of the policy on the CPU "
                f"(one small forward per env step, where a GPU round trip would cost more); "
                f"set scheme.collector_device=cpu")
    inference = c.scheme.inference_device.strip().lower()
    if (algorithm_capabilities(c.algo.name).replay and c.scheme.inference_ranks > 0
            and inference not in ("auto", "cpu")):
        return (f"config key 'scheme.inference_device' ({c.scheme.inference_device}): "
                f"{c.algo.name}'s inference ranks act through a numpy copy of the policy on "
                f"the CPU ('auto' means the CPU for it); set scheme.inference_device=cpu")
    return None


def _check_scheme(c: Config) -> str | None:
    return (scheme_problem(c.scheme, c.train.device) or _preset_agent_problem(c)
            or _offpolicy_scheme_problem(c))


def _preset_agent_problem(c: Config) -> str | None:
    """A named architecture's preset with an algorithm it does not stand for."""
    preset, name, caps = c.scheme.preset, c.algo.name, algorithm_capabilities(c.algo.name)
    if preset == "impala" and caps.storage != "vtrace":
        return (f"scheme.preset=impala trains algo.name=impala (V-trace corrects the "
                f"collectors' policy lag), got algo.name={name}; for {name} with asynchronous "
                f"collectors use scheme.preset=async-ppo")
    if preset in ("apex", "async-sac") and not caps.replay:
        choices = algorithms_with(lambda caps: caps.replay)
        return (f"scheme.preset={preset} streams transitions into a replay, which needs an "
                f"off-policy algorithm ({choices}), got algo.name={name}; "
                f"for on-policy agents use scheme.preset=async-ppo or impala")
    return None


def _offpolicy_scheme_problem(c: Config) -> str | None:
    """Replay agents on MPI: one learner rank holding the replay, asynchronous collectors."""
    s, name = c.scheme, c.algo.name
    if not algorithm_capabilities(c.algo.name).replay or required_world_size(s) == 1:
        return None
    if s.inference_ranks > 0 and not algorithm_capabilities(c.algo.name).remote_acting:
        return (f"config key 'scheme.inference_ranks' ({s.inference_ranks}): algo.name={name} "
                f"plans every action on its collector, which keeps each env's plan and "
                f"planning noise from step to step, and an inference rank holds no such "
                f"state; set scheme.inference_ranks=0")
    fix = "(scheme.preset=apex and async-sac are such schemes)"
    if s.gradient_workers != 1:
        return (f"algo.name={name} on MPI runs one learner rank that holds the replay: set "
                f"scheme.gradient_workers=1 (got {s.gradient_workers}) and add collector "
                f"ranks with scheme.collectors_per_worker {fix}")
    if s.update == "central":
        return (f"algo.name={name} on MPI applies its gradients on the learner rank that "
                f"holds the replay: set scheme.update=decentralized {fix}")
    if s.collection != "async":
        return (f"algo.name={name} on MPI has collectors stream transitions into the "
                f"learner's replay as they go: set scheme.collection=async {fix}")
    return None


def _check_atari(c: Config) -> list[str]:
    """The steps of the Atari chain (checked whatever env.preset is: a typo stays a typo)."""
    a = c.env.atari
    checks = [
        positive("env.atari.noop_max", a.noop_max, strict=False),
        positive("env.atari.frame_skip", a.frame_skip),
        positive("env.atari.screen_size", a.screen_size),
        positive("env.atari.frame_stack", a.frame_stack),
    ]
    if a.repeat_action_probability is not None:
        checks.append(in_unit("env.atari.repeat_action_probability",
                               a.repeat_action_probability))
    return [msg for msg in checks if msg]


def _check_env_id(c: Config) -> str | None:
    return env_problem(c.env)


def _check_replay(c: Config) -> list[str]:
    """Off-policy settings: counts, rates and probabilities in their ranges."""
    r = c.replay
    checks = [
        positive("replay.buffer_size", r.buffer_size),
        positive("replay.batch_size", r.batch_size),
        positive("replay.learning_starts", r.learning_starts, strict=False),
        positive("replay.train_freq", r.train_freq),
        in_unit("replay.tau", r.tau, low_open=True),
        positive("replay.target_update_interval", r.target_update_interval),
        positive("replay.n_step", r.n_step),
        positive("replay.alpha", r.alpha, strict=False),
        in_unit("replay.beta0", r.beta0),
        positive("replay.priority_eps", r.priority_eps),
    ]
    if r.gradient_steps == 0 or r.gradient_steps < -1:
        checks.append(f"config key 'replay.gradient_steps' must be > 0, or -1 for one per env "
                      f"step collected, got {r.gradient_steps}")
    if r.ratio_tolerance < -1:
        checks.append(f"config key 'replay.ratio_tolerance' must be >= 0, or -1 for "
                      f"collectors that are never held back, got {r.ratio_tolerance}")
    caps = algorithm_capabilities(c.algo.name)
    if caps.replay and not caps.target_networks:
        checks += unread("replay", r, ["tau", "target_update_interval"],
                         f"the target networks of "
                         f"{algorithms_with(lambda caps: caps.target_networks and caps.replay)}",
                         f"algo.name={c.algo.name} keeps none")
    if r.batch_size > r.buffer_size:
        checks.append(f"config key 'replay.batch_size' ({r.batch_size}) must not exceed "
                      f"replay.buffer_size ({r.buffer_size})")
    return [msg for msg in checks if msg]


def _check_offpolicy_env(c: Config) -> str | None:
    """The replay stores raw observations and rewards: no running normalisation."""
    if not algorithm_capabilities(c.algo.name).replay:
        return None
    for key in ("normalize_obs", "normalize_reward"):
        if getattr(c.env, key):
            return (f"config key 'env.{key}' is not supported with algo.name={c.algo.name} "
                    f"(the replay keeps raw observations and rewards); set env.{key}=false")
    return None


def _check_sections(c: Config) -> list[str]:
    """The algorithms' own sections: none of another algorithm's set (it would be ignored),
    and the values of the run's own in their ranges (:mod:`.validate_sections`)."""
    problem = unread_section_problem(c.algo, algorithm_type(c.algo.name).section_name())
    return [problem] if problem else section_problems(c)


CHECKS: list[Check] = [_check_plugins, _check_numbers, _check_actor, check_rnd, check_demos,
                       _check_scheme, check_env_groups, check_env_restarts, check_compile,
                       check_deterministic,
                       _check_batch,
                       _check_memory,
                       _check_budget, _check_device,
                       _check_replay, _check_offpolicy_env, check_her, _check_sections,
                       _check_atari, _check_env_id, check_policy_addons, check_league,
                       check_policies]


def problems_message(problems: list[str]) -> str | None:
    """One message for every problem found: the problem itself when there is one, else a
    count and a line each (a user fixes them all in one go instead of one run per typo)."""
    if not problems:
        return None
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in the config:\n  " + "\n  ".join(problems)


def validate(config: Config) -> str | None:
    """Every problem of ``config`` as one message (:func:`problems_message`), or None when
    it is usable. A check that fails on a value an earlier check already refused (a zero
    that a later check divides by) adds nothing: the earlier message names the cause."""
    problems: list[str] = []
    for check in CHECKS:
        try:
            problem = check(config)
        except Exception:
            if not problems:
                raise
            continue
        found = problem if isinstance(problem, list) else [problem] if problem else []
        problems += [p for p in found if p not in problems]
    return problems_message(problems)
