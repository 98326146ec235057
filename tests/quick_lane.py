"""The quick lane, ``pytest -m quick``: a representative part of the suite for everyday
feedback, in under 3 minutes on the 2-core development machine (the whole suite takes
about 25).

It holds the unit tests that take a second or two (whole modules, below), one multi-rank
job per family of schemes (synchronous, asynchronous, central updater, V-trace, replay),
the defaults under ``mpiexec`` (no ``--run-dir``), and the Slurm templates' rendering. What
it leaves out runs in the whole suite (``pytest``), which CI runs: learning curves, every
env family, fault injection, the Slurm test cluster.

:func:`quick_test` says whether a test belongs to it; ``tests/conftest.py`` marks those
``quick``. A module or test named here that no longer exists fails
``tests/test_quick_lane.py``, so the lane cannot shrink unnoticed.
"""
from __future__ import annotations

# modules whose every test takes a second or two
QUICK_MODULES = frozenset({
    "tests/comm/test_channel.py",
    "tests/comm/test_comm_devices.py",
    "tests/exchange/test_acting_slots.py",
    "tests/algorithms/test_algorithm_contract.py",
    "tests/scheme/test_apex.py",
    "tests/algorithms/test_capabilities.py",
    "tests/comm/test_compression.py",
    "tests/config/test_config.py",
    "tests/models/test_distributions.py",
    "tests/envs/test_env_state.py",
    "tests/comm/test_faults.py",
    "tests/buffers/test_her.py",
    "tests/learning/test_in_place.py",
    "tests/learning/test_learner_loop.py",
    "tests/models/test_memory.py",
    "tests/collection/test_messages.py",
    "tests/models/test_mlp_kernel.py",
    "tests/algorithms/test_mpo.py",
    "tests/runtime/test_nonfinite.py",
    "tests/buffers/test_nstep.py",
    "tests/envs/test_obs_format.py",
    "tests/algorithms/test_offpolicy_algorithms.py",
    "tests/collection/test_offpolicy_collection.py",
    "tests/numerics/test_optim_inference.py",
    "tests/population/test_pbt_exploit.py",
    "tests/population/test_pbt_explore.py",
    "tests/population/test_pbt_lineage.py",
    "tests/population/test_pbt_member.py",
    "tests/population/test_pbt_settings.py",
    "tests/population/test_pbt_workspace.py",
    "tests/numerics/test_records.py",
    "tests/cli/test_refusals.py",
    "tests/buffers/test_replay.py",
    "tests/buffers/test_replay_frames.py",
    "tests/learning/test_replay_ratio.py",
    "tests/buffers/test_returns.py",
    "tests/scheme/test_scheme.py",
    "tests/placement/test_policies.py",
    "tests/placement/test_serial_placement.py",
    "tests/runtime/test_signals.py",
    "tests/slurm/test_slurm_lifecycle.py",
    "tests/slurm/test_slurm_render.py",
    "tests/slurm/test_slurm_submit.py",
    "tests/buffers/test_storage.py",
    "tests/buffers/test_vtrace.py",
})

# one multi-rank job per family of schemes, and the defaults under mpiexec
QUICK_TESTS = frozenset({
    # the a2c, async-ppo and a3c presets' learning jobs (each with its preemption or
    # asynchrony check, one job a preset)
    "tests/placement/mpi/test_mpi_training.py::test_collector_preemption_with_dedicated_collectors",
    "tests/placement/mpi/test_mpi_training.py::test_async_collection_is_not_held_back_by_a_slow_collector",
    "tests/placement/mpi/test_mpi_training.py::test_a3c_learns_applying_gradients_as_they_arrive",
    "tests/placement/mpi/test_mpi_offpolicy.py::test_impala_preset_learns_cartpole",
    "tests/placement/mpi/test_mpi_offpolicy.py::test_async_sac_keeps_the_replay_ratio_of_one_process[sac]",
    "tests/placement/mpi/test_mpi_lifecycle.py::test_mpiexec_without_run_dir_trains_in_the_default_run_dir",
    "tests/algorithms/test_families.py::test_every_built_in_declares_its_family_and_its_wiring_loads",
    "tests/algorithms/test_families.py::test_no_table_branch_or_protocol_outside_algorithms_and_config_is_keyed_by_family",
    "tests/experiments/test_sweep.py::test_a_point_whose_env_failed_for_good_is_not_a_stop_to_requeue",
})


def quick_test(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (as pytest names it from the repository root) is in the
    quick lane."""
    return nodeid in QUICK_TESTS or nodeid.split("::")[0] in QUICK_MODULES
