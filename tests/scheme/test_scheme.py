"""Schemes: presets, the rank table and the combinations that are refused."""
import json

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.config import ConfigError, load_config
from hpcrl.scheme import WorldSizeError, assign_roles, required_world_size

PRESET_SIZES = {"serial": 1, "a2c": 3, "ddppo": 2, "a3c": 3, "async-ppo": 3}


@pytest.mark.parametrize("preset, size", PRESET_SIZES.items())
def test_presets_and_their_world_sizes(preset, size):
    cfg = load_config(None, [f"scheme.preset={preset}"])
    assert required_world_size(cfg.scheme) == size
    table = assign_roles(size, cfg.scheme, cfg.env.num_envs)
    assert [r.rank for r in table] == list(range(size))
    envs = sorted((r.env_offset, r.num_envs) for r in table if r.collects)
    # every collecting rank holds env.num_envs consecutive global env indices
    assert [o for o, _ in envs] == [i * cfg.env.num_envs for i in range(len(envs))]


def test_explicit_keys_override_the_preset():
    cfg = load_config(None, ["scheme.preset=ddppo", "scheme.gradient_workers=4",
                             "scheme.preemption.fraction_samples=0.5"])
    assert cfg.scheme.gradient_workers == 4 and cfg.scheme.update == "decentralized"
    assert cfg.scheme.preemption.fraction_samples == 0.5
    assert cfg.scheme.preemption.fraction_workers == 0.6  # kept from the preset


def test_learners_come_first_and_collectors_follow_their_worker():
    cfg = load_config(None, ["scheme.update=central", "scheme.gradient_workers=2",
                             "scheme.collectors_per_worker=2"])
    table = assign_roles(7, cfg.scheme, 8)
    assert [r.role for r in table] == ["updater"] + ["gradient_worker"] * 2 + ["collector"] * 4
    assert [r.feeds for r in table[3:]] == [(1,), (1,), (2,), (2,)]
    assert table[1].fed_by == (3, 4, 0) and table[0].feeds == (1, 2)
    assert [r.learner for r in table] == [True] * 3 + [False] * 4


def test_wrong_world_size_names_the_size_needed():
    cfg = load_config(None, ["scheme.preset=ddppo"])
    with pytest.raises(WorldSizeError,
                       match=r"needs 2 ranks .* has 3; launch it with `mpiexec -n 2`"):
        assign_roles(3, cfg.scheme, 8)


def test_ddppo_on_one_rank_drops_the_presets_preemption():
    """One GPU: `hpcrl slurm render sync --nodes 1 --gpus-per-node 1` renders (the preset's
    straggler preemption has no straggler), while preemption one asks for is refused."""
    from hpcrl.slurm import RenderOptions, render

    cfg = load_config(None, ["scheme.preset=ddppo", "scheme.gradient_workers=1"])
    assert (cfg.scheme.preemption.fraction_workers, cfg.scheme.preemption.fraction_samples) == (
        1.0, 1.0)
    assert load_config(None, ["scheme.preset=ddppo"]).scheme.preemption.fraction_workers == 0.6
    rendered = render(RenderOptions("sync", nodes=1, gpus_per_node=1))
    assert "scheme.gradient_workers=1" in rendered.text
    with pytest.raises(ConfigError, match="no straggler to preempt"):
        load_config(None, ["scheme.preset=ddppo", "scheme.gradient_workers=1",
                           "scheme.preemption.fraction_workers=0.5"])


@pytest.mark.parametrize("sets, message", [
    (["scheme.gradients=async"], "use scheme.update=central"),
    (["scheme.collection=async"], "needs dedicated collector ranks"),
    (["scheme.preset=async-ppo", "scheme.preemption.fraction_workers=0.5"],
     "preemption applies to synchronous collection only"),
    (["scheme.preset=a3c", "scheme.preemption.fraction_workers=0.5"],
     "needs a synchronous collection step"),
    (["scheme.preemption.fraction_workers=0.5"], "no straggler to preempt"),
    (["scheme.preemption.fraction_samples=0"], "must lie in (0, 1]"),
    (["scheme.allreduce=nccl"], "needs the gradient workers on GPUs"),
    (["scheme.gradient_workers=0"], "scheme.gradient_workers' must be >= 1"),
    (["scheme.preset=ring"], "must be one of"),
    (["scheme.preset=ddppo", "scheme.inference_ranks=1"], "set scheme.collectors_per_worker >= 1"),
    (["scheme.preset=a2c", "scheme.inference_ranks=3"], "at most one per collector"),
    (["scheme.gradient_workers=2", "scheme.collectors_per_worker=2", "scheme.inference_ranks=1",
      "algo.ppo.minibatch_size=128"], "must be a multiple of scheme.gradient_workers=2"),
    (["scheme.preset=a2c", "scheme.inference_ranks=-1"], "must be >= 0"),
    (["scheme.preset=a2c", "scheme.inference_ranks=1", "scheme.inference_device=tpu"],
     "'scheme.inference_device' must be"),
    (["scheme.preset=apex", "scheme.inference_ranks=1", "scheme.inference_device=cuda"],
     "act through a numpy copy of the policy on the CPU"),
    (["scheme.preset=a2c", "scheme.inference_ranks=1", "scheme.collector_device=cuda"],
     "has no effect with scheme.inference_ranks=1"),
    (["scheme.preset=a2c", "scheme.min_collectors=2"],
     "applies to asynchronous collection (scheme.collection=async"),
    (["scheme.preset=async-ppo", "scheme.min_collectors=3"],
     "exceeds the job's 2 collector ranks"),
    (["scheme.preset=async-ppo", "scheme.min_collectors=0"], "must be >= 1"),
    (["scheme.preset=async-ppo", "scheme.collector_timeout_s=-1"],
     "'scheme.collector_timeout_s' must be >= 0"),
])
def test_combinations_that_make_no_sense_are_refused(sets, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, sets)
    assert message in str(err.value)


def test_plan_command_text_and_json():
    runner = CliRunner()
    text = runner.invoke(main, ["plan", "--set", "scheme.preset=a3c"])
    assert text.exit_code == 0
    assert "world size: 3" in text.output and "updater" in text.output
    data = json.loads(runner.invoke(main, ["plan", "--json", "--set", "scheme.preset=a2c"]).output)
    assert data["world_size"] == 3 and data["total_envs"] == 16
    assert [r["role"] for r in data["ranks"]] == ["gradient_worker", "collector", "collector"]
    assert data["ranks"][2]["envs"] == [8, 16] and data["ranks"][0]["device"] == "cpu"
    bad = runner.invoke(main, ["plan", "--set", "scheme.gradients=async"])
    assert bad.exit_code != 0 and "scheme.update=central" in bad.output


def test_inference_ranks_sit_beside_the_learners_and_serve_contiguous_collectors():
    cfg = load_config(None, ["scheme.gradient_workers=2", "scheme.collectors_per_worker=3",
                             "scheme.inference_ranks=4", "algo.ppo.minibatch_size=96"])
    size = required_world_size(cfg.scheme)
    assert size == 2 + 4 + 6
    table = assign_roles(size, cfg.scheme, 8)
    assert [r.role for r in table] == (["gradient_worker"] * 2 + ["inference"] * 4
                                       + ["collector"] * 6)
    # worker 0's collectors 6-8 split 2 + 1 over inference ranks 2 and 3; worker 1's over 4, 5
    assert [r.feeds for r in table[2:6]] == [(6, 7), (8,), (9, 10), (11,)]
    assert [r.group for r in table[2:6]] == [0, 0, 1, 1]
    assert [r.inference for r in table[6:]] == [2, 2, 3, 4, 4, 5]
    assert table[6].feeds == (0, 2) and table[2].fed_by == (0, 6, 7)
    assert [r.inference for r in table[:6]] == [-1] * 6
    assert [r.env_offset for r in table[6:]] == [0, 8, 16, 24, 32, 40]


def test_plan_shows_the_inference_ranks_and_whom_they_serve():
    runner = CliRunner()
    text = runner.invoke(main, ["plan", "--set", "scheme.preset=impala",
                                "--set", "scheme.inference_ranks=1"])
    assert text.exit_code == 0, text.output
    assert "1 gradient worker + 1 inference rank + 2 collectors" in text.output
    assert "world size: 4" in text.output
    line = next(x for x in text.output.splitlines() if x.split()[1:2] == ["inference"])
    assert line.split()[:4] == ["1", "inference", "0", "2,3"] and "auto" in line
    data = json.loads(runner.invoke(main, ["plan", "--json", "--set", "scheme.preset=apex",
                                           "--set", "scheme.inference_ranks=2"]).output)
    assert [r["role"] for r in data["ranks"]] == ["gradient_worker", "inference", "inference",
                                                  "collector", "collector"]
    assert [r["inference"] for r in data["ranks"][3:]] == [1, 2]
    assert data["ranks"][1]["device"] == "cpu"  # an off-policy policy acts in numpy
    bad = runner.invoke(main, ["plan", "--set", "scheme.preset=ddppo",
                               "--set", "scheme.inference_ranks=2"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert "scheme.collectors_per_worker >= 1" in bad.output


def test_minibatch_is_checked_against_the_whole_job():
    # 2 workers x 8 envs x 32 steps = 512 samples per update: 256 divides, 384 does not
    assert load_config(None, ["scheme.preset=ddppo"]).algo.ppo.minibatch_size == 256
    with pytest.raises(ConfigError, match="must divide the batch"):
        load_config(None, ["scheme.preset=ddppo", "algo.ppo.minibatch_size=384"])


def test_wrong_world_size_inside_slurm_names_the_allocations_srun():
    cfg = load_config(None, ["scheme.preset=ddppo"])
    with pytest.raises(WorldSizeError, match=r"`srun --mpi=pmi2 -n 2`"):
        assign_roles(3, cfg.scheme, cfg.env.num_envs, "srun --mpi=pmi2")


@pytest.mark.parametrize("sets, says", [
    (["scheme.preset=impala", "scheme.inference_ranks=1"],
     "rollouts and acting through shared memory between ranks of one node, MPI messages "
     "across nodes (scheme.transport=auto)"),
    (["scheme.preset=a2c", "scheme.transport=messages"],
     "rollouts as MPI messages (scheme.transport=messages)"),
    (["scheme.preset=apex", "scheme.transport=shared"],
     "rollouts through shared memory between ranks of one node, refused across nodes"),
    (["scheme.preset=ddppo"], "none: every gradient worker collects its own rollouts"),
])
def test_plan_says_how_the_collectors_exchanges_travel(sets, says):
    args = ["plan"] + [x for item in sets for x in ("--set", item)]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert f"transport: {says}" in text.output
    data = json.loads(CliRunner().invoke(main, args[:1] + ["--json"] + args[1:]).output)
    assert data["transport"].startswith(says)


def test_compression_where_nothing_crosses_as_a_message_is_refused():
    for sets in (["scheme.compress=lz4"], ["scheme.preset=ddppo", "scheme.compress=lz4"]):
        with pytest.raises(ConfigError, match="this scheme sends none"):
            load_config(None, sets)
    for ok in (["scheme.preset=a2c"], ["scheme.preset=a3c"]):  # collectors, async workers
        assert load_config(None, ok + ["scheme.compress=lz4"]).scheme.compress == "lz4"
    plan = CliRunner().invoke(main, ["plan", "--set", "scheme.preset=a2c",
                                     "--set", "scheme.compress=lz4"])
    assert "messages lz4-compressed (scheme.compress=lz4)" in plan.output


def test_a_transport_that_is_not_one_is_refused():
    with pytest.raises(ConfigError, match="scheme.transport"):
        load_config(None, ["scheme.preset=a2c", "scheme.transport=shm"])


def test_a_plan_whose_topology_left_its_preset_says_so():
    """The showcase sets its own topology on the default preset: its plan must not read
    'serial'; a preset as it is keeps its name."""
    from hpcrl.config import from_dict
    from hpcrl.scheme.plan import preset_label

    custom = from_dict({}, ["scheme.gradient_workers=2", "scheme.collectors_per_worker=4",
                            "scheme.collection=async"]).scheme
    assert preset_label(custom) == ("custom (preset serial, gradient_workers, "
                                    "collectors_per_worker, collection changed)")
    assert preset_label(from_dict({}, ["scheme.preset=ddppo"]).scheme) == "ddppo"


def test_lost_collector_bounds_that_hold_are_taken():
    cfg = load_config(None, ["scheme.preset=impala", "scheme.collectors_per_worker=3",
                             "scheme.min_collectors=3", "scheme.collector_timeout_s=0"])
    assert (cfg.scheme.min_collectors, cfg.scheme.collector_timeout_s) == (3, 0.0)
    # the defaults hold in every scheme, synchronous ones included
    assert load_config(None, ["scheme.preset=ddppo"]).scheme.min_collectors == 1
