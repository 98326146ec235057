"""The DeepMind Control Suite (``dm-control``) through Shimmy's Gymnasium ids,
``dm_control/<domain>-<task>-v0`` (``dm_control/cartpole-swingup-v0``).

Importing ``shimmy`` registers them when ``dm_control`` is installed (and registers nothing,
silently, when it is not: hpcrl imports ``dm_control`` first, so a missing package is
refused by name). A task observes a ``Dict`` of float64 arrays (cartpole's ``position`` and
``velocity``; walker's ``height`` is a scalar), which every algorithm takes through
``actor.encoder=mlp`` (each key's values, carried as float32), and acts in a ``Box`` of
[-1, 1]. Episodes are 1,000 steps, ended by the time limit (``truncated``). dm_control
chooses its renderer when imported: on a node without a display hpcrl chooses one that
renders off-screen first (:func:`~hpcrl.envs.noise.headless_gl`), so videos work.
"""
from __future__ import annotations

import re

from hpcrl.envs.noise import headless_gl, no_display_probe_warning
from hpcrl.envs.suites.suite import SUITES, Suite


def _register() -> None:
    headless_gl()  # (dm_control picks its renderer when imported: one that renders off-screen)
    with no_display_probe_warning():
        import dm_control.suite  # noqa: F401  (shimmy skips its ids without it, silently)
        import shimmy  # noqa: F401  (registers the dm_control/... ids on import)


DMC = Suite(
    name="DeepMind Control", extra="dmc", packages=("shimmy[dm-control]",),
    modules=("dm_control", "shimmy"), ids=re.compile(r"^dm_control/"), register=_register,
    example="dm_control/cartpole-swingup-v0")
SUITES.add(DMC)
