"""Components of one's own on MPI schemes: the README's example components
(examples/custom_components.py, by import path) reach the weights of one process on 2
DD-PPO ranks and learn under a3c and impala, the example algorithms with config sections of
their own (examples/reinforce_baseline.py, examples/clipped_double_dqn.py) learn on DD-PPO
and Ape-X ranks, the example script trains through the
Python API on 1 and on 2 ranks, and the README's script without its __main__ guard trains
once on 2 ranks (each rank finds the classes in the running script, never importing it)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from mpirun import FAST, ROOT, column, mpiexec, train

sys.path.insert(0, str(ROOT / "examples"))  # the components, for the in-process ranks
from test_mpi_equivalence import two_ranks_then_one
from user_script import TINY, run_script, runs, write_script

from hpcrl.numerics.flat import params_to_flat

LAB = ["algo.name=custom_components:KLPenaltyPPO", "algo.kwargs={target_kl: 0.02}",
       "actor.network=custom_components:SquashEncoder", "actor.hidden_sizes=[64]",
       "env.wrappers=[{custom_components:TimePenalty: {penalty: 0.0}}]"]


@pytest.mark.timeout(150)
@pytest.mark.parallel(2)
def test_plugins_on_two_ddppo_ranks_reach_the_weights_of_one():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    role, mine, trainer = two_ranks_then_one(comm, LAB)
    if comm.rank == 0:
        torch.testing.assert_close(mine, params_to_flat(trainer.actor),
                                   rtol=1e-4, atol=1e-5)
        assert role.algorithm.beta == trainer.learner.algorithm.beta != 1.0


@pytest.mark.timeout(200)
@pytest.mark.parametrize("n,sets", [
    # a3c makes about 17 -> 140-160 in 20k steps (3 runs; 35 asked)
    (3, ["scheme.preset=a3c", "train.total_env_steps=20000"] + LAB),
    (3, ["scheme.preset=impala", "actor.network=custom_components:SquashEncoder",
         "actor.network_kwargs={width: 64}", "actor.hidden_sizes=[64]",
         "env.wrappers=[custom_components:TimePenalty]", "train.total_env_steps=40000"]),
], ids=["a3c-lab", "impala-network"])
def test_plugins_learn_on_asynchronous_schemes(tmp_path, n, sets):
    train(n, tmp_path, sets)
    returns = column(tmp_path, "episode_return_mean")
    first, last = sum(returns[:5]) / 5, sum(returns[-5:]) / 5
    # IMPALA's one step per rollout learns CartPole slower: the built-in MLP makes about
    # 16 -> 40 in 30k steps too
    assert last >= 1.8 * first and last >= 35, returns


@pytest.mark.timeout(200)
@pytest.mark.parametrize("ranks", [1, 2])
def test_the_example_script_trains_on_one_and_two_ranks(tmp_path, ranks):
    script = str(ROOT / "examples" / "custom_components.py")
    cmd = ([sys.executable, script] if ranks == 1
           else [mpiexec(), "-n", "2", sys.executable, script])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on {ranks} rank(s)" in done.stdout and "eval" in done.stdout
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("KLPenaltyPPO-CartPole-v1-")
    saved = (run / "config.yaml").read_text()
    assert "custom_components:KLPenaltyPPO" in saved and "custom_components:TimePenalty" in saved
    assert column(run, "episode_return_mean")[-1] >= 100


@pytest.mark.timeout(200)
def test_an_unguarded_script_trains_once_on_two_ranks(tmp_path):
    write_script(tmp_path, guarded=False, sets=TINY + ["scheme.preset=ddppo"])
    done = run_script(tmp_path, launcher=(mpiexec(), "-n", "2"), timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs(tmp_path)  # both ranks train their part of one run, once
    # each rank prints its result once: rank 0 the run and its evaluation, rank 1 the run and
    # None. mpiexec forwards the two ranks' output in chunks that may interleave mid-line, so
    # the lines are not compared, only what the two prints say in all
    out = done.stdout
    assert out.count(str(run)) == 2 and out.count("'mean_return'") == 1, out
    assert out.count("None") == 1 and len(out.splitlines()) == 2, out
    assert column(run, "env_steps")[-1] == 1024


_ = FAST  # the CLI runs above use mpirun's quiet defaults


@pytest.mark.timeout(150)
def test_an_offpolicy_plugin_trains_on_the_apex_scheme(tmp_path):
    """The example off-policy plug-in (examples/munchausen_dqn.py) on a learner and two
    collectors: the collectors build its policy from its class, the learner its loss
    (4 rows of 512 steps, the last 3 trained on)."""
    train(3, tmp_path, ["scheme.preset=apex", "algo.name=munchausen_dqn:MunchausenDQN",
                        "train.total_env_steps=2048"])
    ratios, bonuses = column(tmp_path, "replay_ratio"), column(tmp_path, "munchausen_bonus")
    trained = [b for b, r in zip(bonuses, ratios, strict=True) if r > 0]  # after learning_starts
    assert trained and all(-0.9 <= b < 0 for b in trained), bonuses


@pytest.mark.timeout(200)
@pytest.mark.parametrize("n,sets", [
    (2, ["scheme.preset=ddppo", "algo.name=reinforce_baseline:ReinforceBaseline",
         "algo.reinforce.baseline=value", "train.total_env_steps=20000"]),
    (3, ["scheme.preset=apex", "algo.name=clipped_double_dqn:ClippedDoubleDQN",
         "algo.cdq.min_weight=0.75", "actor.hidden_sizes=[64,64]",
         "train.total_env_steps=12288"]),
    (3, ["scheme.preset=a2c", "algo.name=evolution_strategies:EvolutionStrategies",
         "algo.num_steps=500", "algo.lr=0.03", "env.num_envs=4",
         "train.total_env_steps=20000"]),
], ids=["reinforce-ddppo", "clipped-double-dqn-apex", "evolution-strategies-a2c"])
def test_plugins_with_sections_of_their_own_learn_on_mpi_schemes(tmp_path, n, sets):
    """One module each, named by import path on every rank: its own keys reach the
    learner (and, under Ape-X, the collectors' epsilons and priorities); evolution
    strategies, a family of its own, streams its collectors' returns to its own data path."""
    train(n, tmp_path, sets)
    returns = [r for r in column(tmp_path, "episode_return_mean") if r == r]  # nan: none yet
    # about 20 at random play, over 100 on these budgets; the margin is for a loaded box
    # (evolution strategies on a2c, the same on every run, start at 11 and make 114)
    assert returns[-1] >= 50 and returns[-1] >= 2 * returns[0], returns
