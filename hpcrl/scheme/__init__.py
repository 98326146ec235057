"""Schemes: presets, validation and the mapping of roles onto MPI ranks."""
from hpcrl.scheme.presets import PRESETS, apply_preset
from hpcrl.scheme.topology import (
                                   COLLECTOR,
                                   EVALUATOR,
                                   INFERENCE,
                                   SPARE,
                                   UPDATER,
                                   WORKER,
                                   RankRole,
                                   WorldSizeError,
                                   assign_roles,
                                   collecting_ranks,
                                   describe,
                                   envs_per_gradient_step,
                                   required_world_size,
                                   scheme_problem,
                                   spare_ranks,
)

__all__ = ["COLLECTOR", "EVALUATOR", "INFERENCE", "PRESETS", "RankRole", "SPARE", "UPDATER",
           "WORKER",
           "WorldSizeError", "apply_preset", "assign_roles", "collecting_ranks", "describe",
           "envs_per_gradient_step", "required_world_size", "scheme_problem", "spare_ranks"]
