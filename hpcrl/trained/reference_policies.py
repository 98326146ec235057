"""The other policies of the KL add-ons (``algo.addons.kl_policies``): found, matched to the
run's env, and loaded frozen onto a learner.

Each entry names a run directory (its ``checkpoints/last.pt`` as it is when training
starts) or a checkpoint file. :func:`reference_problem` reads every one and refuses, naming
the entry and the fix, a missing or unreadable file, a policy that is not an on-policy
actor-critic (a replay agent's), a recurrent one (the minibatches hold no state for it),
and one whose observation or action space differs from the env's; it runs where training
starts (:func:`hpcrl.build.env_spaces`), before any rank works. :func:`attach_references`
then loads them once per learner, on its device, and hands them to the algorithm's add-ons
(:class:`~hpcrl.algorithms.addons.PolicyLossAddons`), which freeze them.
"""
from __future__ import annotations

from typing import Any

import torch

from hpcrl.envs.vector import EnvSpaces
from hpcrl.errors import ConfigError
from hpcrl.models.actor import ActorCritic
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint
from hpcrl.sections.policy_addons import PolicyAddonsConfig
from hpcrl.trained.loading import checkpoint_file
from hpcrl.trained.saved_policy import actor_from_saved, saved_action_space


def _key(index: int) -> str:
    return f"config key 'algo.addons.kl_policies[{index}].policy'"


def _read(index: int, path: str, tensors: bool) -> dict[str, Any]:
    """The saved policy of entry ``index`` (``tensors``: read, else memory-mapped)."""
    try:
        file = checkpoint_file(path)
        return load_checkpoint(file, mmap=not tensors)["policy"]
    except CheckpointError as err:
        raise ConfigError(f"{_key(index)} ({path}): {err}; name a run directory or a "
                          f"checkpoint file of a trained ppo, a2c or impala run") from None


def _same_action(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    return all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k]
               for k in a)


def record_problem(record: dict[str, Any], spaces: EnvSpaces) -> str | None:
    """Why the policy of ``record`` cannot be compared with this run's policy on its
    minibatches (None when it can)."""
    config = record.get("config", {})
    name = config.get("algo", {}).get("name", "?")
    if record.get("acts_with", "actor_critic") != "actor_critic":
        return (f"it was trained by {name}, whose policy is a replay agent's, not an "
                f"on-policy actor-critic")
    memory = config.get("actor", {}).get("memory", "none")
    if memory != "none":
        return (f"its actor is recurrent (actor.memory={memory}), and a minibatch holds no "
                f"recurrent state of its own for it")
    if list(record["obs_shape"]) != list(spaces.obs_shape) or (
            "obs_format" in record and record["obs_format"] != spaces.obs_format.record()):
        return (f"it observes {tuple(record['obs_shape'])}, this run's env "
                f"{tuple(spaces.obs_shape)} (or the same shape differently encoded)")
    if not _same_action(record["action"], saved_action_space(spaces.action_space)):
        return f"its action space differs from this env's ({spaces.action_space})"
    return None


def reference_problem(addons: PolicyAddonsConfig, spaces: EnvSpaces) -> str | None:
    """The refusal of the first ``algo.addons.kl_policies`` entry that cannot be used in an
    env of ``spaces`` (None: all can)."""
    for index, entry in enumerate(addons.kl_policies):
        record = _read(index, entry["policy"], tensors=False)
        problem = record_problem(record, spaces)
        if problem is not None:
            return (f"{_key(index)} ({entry['policy']}): {problem}; a KL add-on compares "
                    f"the action distributions of a feedforward ppo, a2c or impala policy "
                    f"trained on the same env")
    return None


def load_references(addons: PolicyAddonsConfig, spaces: EnvSpaces,
                    device: torch.device | str = "cpu") -> list[ActorCritic]:
    """The policies of ``algo.addons.kl_policies`` in order, each read once, on
    ``device``."""
    references = []
    for index, entry in enumerate(addons.kl_policies):
        record = _read(index, entry["policy"], tensors=True)
        problem = record_problem(record, spaces)
        if problem is not None:  # the file changed since training started
            raise ConfigError(f"{_key(index)} ({entry['policy']}): {problem}")
        actor = actor_from_saved(record)
        assert isinstance(actor, ActorCritic)  # record_problem refused every other policy
        references.append(actor.to(device))
    return references


def attach_references(algorithm: Any, addons: PolicyAddonsConfig, spaces: EnvSpaces,
                      device: torch.device | str = "cpu") -> None:
    """Give ``algorithm``'s KL add-ons the policies ``addons.kl_policies`` names (nothing to
    do without any)."""
    own = getattr(algorithm, "addons", None)
    if own is not None and own.needs_references:
        own.attach(load_references(addons, spaces, device))

