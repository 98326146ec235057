"""Small tasks of hpcrl's own, registered with Gymnasium when this package is imported.

``env.id: hpcrl.tasks:Corridor-v0`` (the ``module:EnvId`` form imports this package first)
selects one. They exist to show, on a CPU and in seconds, what an idea of the library is
for: :class:`~hpcrl.tasks.corridor.Corridor` is a sparse-reward exploration task that plain
PPO does not solve in a short budget and PPO with RND does.
"""
from __future__ import annotations

import gymnasium as gym

from hpcrl.tasks.corridor import Corridor

if "Corridor-v0" not in gym.registry:
    gym.register("Corridor-v0", entry_point="hpcrl.tasks.corridor:Corridor")

__all__ = ["Corridor"]
