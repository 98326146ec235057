"""Placements: where the roles run (one process here; MPI ranks in hpcrl.placement.mpi)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcrl.config.schema import Config
    from hpcrl.core.envs import EnvSpaces
    from hpcrl.placement.serial import SerialPlacement
    from hpcrl.placement.serial_offpolicy import SerialOffPolicyPlacement


def make_placement(config: Config, spaces: EnvSpaces
                   ) -> SerialPlacement | SerialOffPolicyPlacement:
    """The serial placement of ``config.algo.name``: the on-policy synchronous learner loop
    over a communicator of one process, or the off-policy collector and replay learner.
    Raises ConfigError when the algorithm cannot act in the env's action space."""
    if config.algo.capabilities.replay:
        from hpcrl.config.loader import ConfigError
        from hpcrl.core.algorithms.offpolicy import action_space_problem
        from hpcrl.placement.serial_offpolicy import SerialOffPolicyPlacement

        problem = action_space_problem(config.algo.name, spaces, config.env.id)
        if problem:
            raise ConfigError(problem)
        return SerialOffPolicyPlacement(config, spaces)
    from hpcrl.placement.serial import SerialPlacement

    return SerialPlacement(config, spaces)
