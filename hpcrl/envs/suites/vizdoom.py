"""ViZDoom's scenarios, registered by importing ``vizdoom.gymnasium_wrapper``.

Their preprocessing chain is ``env.preset: vizdoom`` (:mod:`hpcrl.envs.vizdoom_preset`); a
scenario made without it still starts its engine in a directory of its own process's
(:class:`~hpcrl.envs.vizdoom_preset.EngineDirectory`).
"""
from __future__ import annotations

from hpcrl.envs.suites.suite import SUITES, Suite
from hpcrl.envs.vizdoom_preset import VIZDOOM_IDS, VIZDOOM_PACKAGES, EngineDirectory


def _register() -> None:
    import vizdoom.gymnasium_wrapper  # noqa: F401  (registers the Vizdoom... ids)


VIZDOOM = Suite(
    name="ViZDoom", extra="vizdoom", packages=VIZDOOM_PACKAGES, modules=("vizdoom",),
    ids=VIZDOOM_IDS, register=_register, adapt=EngineDirectory,
    example="VizdoomBasic-v1")
SUITES.add(VIZDOOM)
