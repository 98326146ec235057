"""The policy part of a checkpoint: the trained actor's weights with what rebuilds it
without the env (config, observation and action spaces), written by :func:`saved_policy`
and read back by :func:`actor_from_saved` (``hpcrl eval``, ``load_policy``, the reference
policies of the policy-loss add-ons)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hpcrl.algorithms import algorithm_type, make_policy
from hpcrl.components.import_paths import is_import_path
from hpcrl.config.loader import from_dict
from hpcrl.envs.obs_format import box_format, format_from_saved
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.actor import ActorCritic
from hpcrl.sections.policy_addons import PolicyAddonsConfig
from hpcrl.sections.rnd_section import RndConfig
from hpcrl.sections.schema import ActorConfig, Config


def saved_policy(config: dict[str, Any], spaces: EnvSpaces,
                  actor: torch.nn.Module) -> dict[str, Any]:
    """The actor's weights with what rebuilds it (config, observation and action spaces).

    ``config``: the run's config as plain dicts (:func:`~hpcrl.config.loader.to_dict`),
    which the caller keeps: a run writes a record per checkpoint, and building the config's
    dicts anew each time left the allocator holding about 0.75 kB more per checkpoint for
    the first few thousand (bounded, but a soak of a default run read it as growth), and
    the config does not change during a run.
    """
    record = {"obs_shape": list(spaces.obs_shape), "obs_format": spaces.obs_format.record(),
              "action": saved_action_space(spaces.action_space),
              "config": config,
              "state_dict": actor.state_dict(),
              # what the state dict fits, as the algorithm's class declares: an
              # actor-critic, or an off-policy algorithm's own policy (a plug-in's is known
              # only by importing it: this says which)
              "acts_with": algorithm_type(config["algo"]["name"]).saved_policy_kind}
    box = spaces.observation_space
    if config["actor"]["network"] and isinstance(box, gym.spaces.Box):  # the user's network
        record["observation_space"] = {"low": torch.from_numpy(np.asarray(box.low).copy()),
                                       "high": torch.from_numpy(np.asarray(box.high).copy()),
                                       "dtype": str(box.dtype)}
    return record


def saved_action_space(space: gym.Space) -> dict[str, Any]:
    """The action space as a saved policy keeps it (plain data and tensors)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": torch.from_numpy(
            np.asarray(space.nvec, np.int64).copy())}
    if isinstance(space, gym.spaces.MultiBinary):
        # n: an int, or the shape of a multi-dimensional space (a tuple: int() refused it)
        return {"type": "multi_binary", "n": space.n if isinstance(space.n, int) else list(space.n)}
    box_space = as_box(space)
    return {"type": "box", "low": torch.from_numpy(box_space.low.copy()),
            "high": torch.from_numpy(box_space.high.copy())}


def actor_from_saved(record: dict[str, Any]) -> torch.nn.Module:
    """Rebuild the trained actor stored by :func:`saved_policy` (an :class:`ActorCritic`, or
    the policy module of an off-policy algorithm); calling it gives deterministic actions."""
    action = record["action"]
    if action["type"] == "discrete":
        space: gym.Space = gym.spaces.Discrete(action["n"])
    elif action["type"] == "multi_discrete":
        space = gym.spaces.MultiDiscrete(action["nvec"].numpy())
    elif action["type"] == "multi_binary":
        space = gym.spaces.MultiBinary(action["n"])
    else:
        # (float64 bounds, as DeepMind Control's, cast here: Box warns when it casts them)
        low, high = (action[key].numpy().astype(np.float32) for key in ("low", "high"))
        space = gym.spaces.Box(low, high, dtype=np.float32)
    # without a stored format: a plain Box, as EnvSpaces makes when given none
    fmt = (format_from_saved(record["obs_format"]) if "obs_format" in record
           else box_format(tuple(record["obs_shape"])))
    box = record.get("observation_space")
    observation_space = (gym.spaces.Box(box["low"].numpy(), box["high"].numpy(),
                                        dtype=np.dtype(box["dtype"])) if box else None)
    spaces = EnvSpaces(tuple(record["obs_shape"]), space, fmt, observation_space)
    cfg = record["config"]
    name = cfg["algo"]["name"]
    # what the state dict fits, as the record says: an actor-critic, rebuilt from the
    # record's sections (a plug-in's module need not be importable where the run is
    # evaluated), or the algorithm's own policy, which its class builds; a record written
    # before records said so is read as its built-in's class declares (a plug-in's as an
    # actor-critic)
    acts_with = record.get("acts_with") or (
        "actor_critic" if is_import_path(name) else algorithm_type(name).saved_policy_kind)
    if acts_with == "policy":
        policy = make_policy(config_from_saved(record), spaces)
        policy.load_state_dict(record["state_dict"])
        return policy.eval()
    addons = PolicyAddonsConfig(**cfg["algo"].get("addons", {}))
    actor = ActorCritic(spaces, ActorConfig(**cfg["actor"]), cfg["env"]["normalize_obs"],
                        cfg["env"]["clip_obs"], RndConfig(**cfg.get("rnd", {})),
                        addons.predictors)
    actor.load_state_dict(record["state_dict"])
    return actor.eval()


def config_from_saved(record: dict[str, Any]) -> Config:
    """The :class:`Config` a :func:`saved_policy` was trained with (its ``config`` entry)."""
    return from_dict(record["config"], saved=True)
