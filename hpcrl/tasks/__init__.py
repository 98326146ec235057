"""Small tasks of hpcrl's own, registered with Gymnasium when this package is imported.

``env.id: hpcrl.tasks:Corridor-v0`` (the ``module:EnvId`` form imports this package first)
selects one. They exist to show, on a CPU and in seconds, what an idea of the library is
for: :class:`~hpcrl.tasks.corridor.Corridor` is a sparse-reward exploration task that plain
PPO does not solve in a short budget and PPO with RND does;
:class:`~hpcrl.tasks.point_reach.PointReach` (``PointReach-v0``) a sparse goal task in
Gymnasium-Robotics' form that plain SAC does not solve in a short budget and SAC with
hindsight replay does.
"""
from __future__ import annotations

import gymnasium as gym

from hpcrl.tasks.corridor import Corridor
from hpcrl.tasks.point_reach import MAX_EPISODE_STEPS, PointReach

if "Corridor-v0" not in gym.registry:
    gym.register("Corridor-v0", entry_point="hpcrl.tasks.corridor:Corridor")
if "PointReach-v0" not in gym.registry:
    gym.register("PointReach-v0", entry_point="hpcrl.tasks.point_reach:PointReach",
                 max_episode_steps=MAX_EPISODE_STEPS)

__all__ = ["Corridor", "PointReach"]
