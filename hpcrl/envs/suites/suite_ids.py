"""The suites hpcrl registers by id, and what is done with an id of one.

:func:`register_suite` imports and registers the suite an ``env.id`` belongs to, so its ids
work with no module prefix in every process that makes envs (collector ranks, async env
subprocesses, evaluation), and a missing package is refused in one line naming the extra
before any work starts. :func:`adapt_env` applies the suite's own wrapper to an env it made.
"""
from __future__ import annotations

import gymnasium as gym

from hpcrl.envs.suites.suite import SUITES, Suite


def suite_of(env_id: str) -> tuple[Suite, bool] | None:
    """The suite ``env_id`` belongs to and whether surely (its ``ids``) or maybe (its
    ``maybe_ids``, when no suite claims the id surely); None when it is no suite's."""
    for suite in SUITES:
        if suite.owns(env_id):
            return suite, True
    for suite in SUITES:
        if suite.may_own(env_id):
            return suite, False
    return None


def register_suite(env_id: str) -> str | None:
    """Register the suite of ``env_id`` when it is not registered yet; returns why that
    failed (a missing package, with its install command) or None. An id with a module prefix
    is left to that module."""
    if ":" in env_id or env_id in gym.registry:
        return None
    found = suite_of(env_id)
    if found is None:
        return None
    suite, sure = found
    try:
        suite.register()
    except ImportError as err:
        return suite.missing(env_id, err) if sure else None
    return None


def adapt_env(env: gym.Env, env_id: str) -> gym.Env:
    """``env`` (made from ``env_id`` with no preprocessing chain) in its suite's own
    wrapper, where the suite has one."""
    found = suite_of(env_id)
    if found is None or not found[1] or found[0].adapt is None:
        return env
    return found[0].adapt(env)


def install_of_module(entry_point: str) -> str | None:
    """The install command of the suite whose module ``entry_point`` (``module:Name``) lives
    in, or None."""
    top = entry_point.split(":", 1)[0].split(".", 1)[0]
    return next((suite.install for suite in SUITES if top in suite.modules), None)
