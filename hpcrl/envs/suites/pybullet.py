"""PyBullet's locomotion and manipulation tasks (``pybullet`` with
``pybullet-envs-gymnasium``): ``HalfCheetahBulletEnv-v0``, ``AntBulletEnv-v0``, ...

Importing ``pybullet_envs_gymnasium`` registers their Gymnasium ids. They observe a ``Box``
of floats and act in a ``Box`` of [-1, 1], as MuJoCo's do, without MuJoCo: the open-source
Bullet physics of the seed library's continuous-control suite. PyBullet's C library prints
its build time when imported and ``argv[0]=`` when an env connects to its engine, on the
process's standard output, where Python cannot hold it back.
"""
from __future__ import annotations

import re

from hpcrl.envs.suites.suite import SUITES, Suite


def _register() -> None:
    import pybullet  # noqa: F401  (the engine: ImportError names it when it is missing)
    import pybullet_envs_gymnasium  # noqa: F401  (registers the ...BulletEnv-v0 ids)


PYBULLET = Suite(
    name="PyBullet", extra="pybullet", packages=("pybullet", "pybullet-envs-gymnasium"),
    modules=("pybullet_envs_gymnasium", "pybullet"), ids=re.compile(r"^\w+BulletEnv-v0$"),
    register=_register, example="HalfCheetahBulletEnv-v0")
SUITES.add(PYBULLET)
