"""Envs that come back (issue 46): an env that raises, dies or hangs is made again with a
fresh seed, its unfinished episode cut as a truncation each family's learner treats right,
counted, and bounded by ``env.max_restarts``; in one process, in subprocesses and in EnvPool.
The crashing-env jobs (serial, synchronous and asynchronous MPI schemes) are in
tests/envs/test_crashing_envs.py and tests/placement/mpi/test_mpi_crashing_envs.py."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "placement" / "mpi"))  # the failing envs' module
import hpcrl_crashing  # noqa: E402,F401  (registers the envs)
from test_env_groups import assert_same, trained  # noqa: E402

from hpcrl.buffers.returns import gae  # noqa: E402
from hpcrl.build import env_groups, env_spaces, make_actor, rollout_layout  # noqa: E402
from hpcrl.collection.collector import rollout_collector, transition_collector  # noqa: E402
from hpcrl.collection.transition_filler import TransitionSections, chunk_layout  # noqa: E402
from hpcrl.config import from_dict  # noqa: E402
from hpcrl.envs.restarts import (  # noqa: E402
    IN_PLACE,
    RESPAWNED,
    EnvFailure,
    EnvRestartsExhausted,
    fresh_seed,
    restart_marks,
)
from hpcrl.envs.scripted import collector_env_groups  # noqa: E402
from hpcrl.envs.vector import make_vector_env  # noqa: E402

FAIL_ONCE = "hpcrl_crashing:FailOnceCartPole-v0"
SEED = 7  # env i of a job is first reset with SEED + i
SETS = ["env.num_envs=4", "algo.num_steps=16", f"seed={SEED}", "train.eval_episodes=0",
        "train.tensorboard=false", "algo.ppo.minibatch_size=32"]


def fail_once(env: int, step: int, how: str = "raise") -> list[str]:
    """Keys of a job whose env ``env`` fails once, at its step ``step``, as ``how`` says."""
    return [f"env.id={FAIL_ONCE}",
            f"env.kwargs={{fail_seed: {SEED + env}, fail_step: {step}, how: {how}}}"]


def reset_obs(seed: int) -> np.ndarray:
    """CartPole's first observation from ``reset(seed=seed)``."""
    return gym.make("CartPole-v1").reset(seed=seed)[0]


def collect(sets: list[str]):
    """One rollout of a collector of ``sets``'s envs (and the config)."""
    cfg = from_dict({}, SETS + sets)
    spaces = env_spaces(cfg)
    actor = make_actor(cfg, spaces)
    envs = collector_env_groups(cfg.env, 0, env_groups(cfg, remote=False))
    collector = rollout_collector(envs, actor, cfg.env, cfg.algo.gamma, cfg.seed)
    rollout = rollout_layout(cfg, spaces, cfg.env.num_envs).new()
    collector.collect(rollout)
    envs.close()
    return rollout, cfg


@pytest.mark.parametrize("groups", [1, 2])
def test_a_step_that_raises_is_cut_and_its_env_made_again_with_a_fresh_seed(groups):
    rollout, cfg = collect(fail_once(2, 5) + [f"scheme.env_groups={groups}"])
    t, i, gamma = 4, 2, cfg.algo.gamma  # its 5th step is step 4 of the rollout
    assert rollout.env_restarts == 1
    assert rollout.truncated[t, i] == 1 and rollout.terminated[t, i] == 0
    assert rollout.rewards[t, i] == 0 and rollout.episode_lengths[t, i] == 0
    assert rollout.next_values[t, i] == pytest.approx(rollout.values[t, i] / gamma)
    # the env made again plays from a fresh seed of its own stream
    np.testing.assert_allclose(rollout.obs[t + 1, i], reset_obs(fresh_seed(SEED + i,
                                                                            IN_PLACE, 1)))
    assert not np.allclose(rollout.obs[t + 1, i], reset_obs(SEED + i))
    # GAE: the failed step teaches nothing, the steps before bootstrap from V(o_t)
    advantages, returns = gae(*(torch.from_numpy(x) for x in (
        rollout.rewards, rollout.values, rollout.terminated, rollout.truncated,
        rollout.next_values)), gamma, cfg.algo.gae_lambda)
    assert advantages[t, i] == pytest.approx(0.0, abs=1e-6)
    assert returns[t, i] == pytest.approx(float(rollout.values[t, i]), abs=1e-6)
    delta = rollout.rewards[t - 1, i] + gamma * rollout.values[t, i] - rollout.values[t - 1, i]
    assert advantages[t - 1, i] == pytest.approx(float(delta), abs=1e-5)
    # the other envs were not touched
    assert rollout.truncated[:, [0, 1, 3]].sum() == 0


def test_a_reset_that_raises_is_made_again_and_counted():
    rollout, _ = collect(fail_once(1, 0, "reset"))
    assert rollout.env_restarts == 1  # in the collector's first reset
    np.testing.assert_allclose(rollout.obs[0, 1], reset_obs(fresh_seed(SEED + 1, IN_PLACE, 1)))
    np.testing.assert_allclose(rollout.obs[0, 0], reset_obs(SEED))


def test_a_recurrent_actor_starts_the_new_episode_from_a_zero_state():
    rollout, _ = collect(fail_once(2, 4) + ["actor.memory=gru", "actor.memory_size=8",
                                            "algo.bptt_len=4", "algo.num_steps=8",
                                            "algo.ppo.minibatch_size=16"])
    # the failure at step 3: step 4 starts a sequence, and a new episode in env 2
    assert rollout.truncated[3, 2] == 1
    assert np.all(rollout.memory[1, 2] == 0.0)
    assert np.all(np.abs(rollout.memory[1, [0, 1, 3]]).sum(axis=-1) > 0)


def test_transitions_of_a_cut_episode_bootstrap_from_its_last_observation():
    cfg = from_dict({}, ["algo.name=dqn", "env.num_envs=2", "replay.n_step=3",
                         "algo.num_steps=8", "replay.learning_starts=1000", f"seed={SEED}",
                         *fail_once(1, 5)])
    spaces = env_spaces(cfg)
    from hpcrl.algorithms import make_policy

    envs = collector_env_groups(cfg.env, 0)
    sections = TransitionSections(cfg.env, cfg.replay, cfg.algo, cfg.train, cfg.seed)
    collector = transition_collector(envs, make_policy(cfg, spaces), sections)
    chunk = chunk_layout(cfg.replay, cfg.algo, spaces.obs_shape, spaces.action_shape, 2).new()
    collector.collect(chunk, 8)
    envs.close()
    k = chunk.count
    obs, nxt, disc = chunk.obs[:k], chunk.next_obs[:k], chunk.discounts[:k]
    o4 = nxt[disc == np.float32(cfg.algo.gamma)]  # env 1's cut step 4: the window of step 3
    assert len(o4) == 1
    ends_there = np.all(nxt == o4[0], axis=1)  # the windows of steps 1, 2, 3 end at o_4
    g = cfg.algo.gamma
    np.testing.assert_allclose(sorted(disc[ends_there]), sorted([g, g ** 2, g ** 3]), rtol=1e-6)
    assert not np.any(np.all(obs == o4[0], axis=1))  # the failed step is no transition
    assert chunk.env_restarts == 1
    assert k == 6 + 5  # env 0: 6 full windows; env 1: 2 full, 2 cut, 1 after the restart


def test_hindsight_replay_closes_a_cut_episode_where_it_was_cut():
    from her_episodes import CODEC, achieved_after, episode, replay

    buf = replay("final", streams=1)
    buf.add_stream(0, *episode(5, 0.0, 50.0, end_last=False))  # cut after its 5th step
    after_cut = np.zeros(4, bool)
    after_cut[0] = True
    buf.add_stream(0, *episode(4, 10.0, 60.0), after_cut)
    again = np.zeros(5, bool)
    again[3] = True  # steps 9-11 cut inside a chunk, steps 12-13 a new episode
    buf.add_stream(0, *episode(5, 20.0, 70.0), again)
    # each episode ends where it was cut: its 'final' goal is its own last point
    assert buf.ep_last[buf.rows_of(0, 0)] == 4 and achieved_after(buf, 0, 4) == 5.0
    assert buf.ep_first[buf.rows_of(0, 5)] == 5 and buf.ep_last[buf.rows_of(0, 5)] == 8
    assert buf.ep_first[buf.rows_of(0, 9)] == 9 and buf.ep_last[buf.rows_of(0, 9)] == 11
    assert buf.ep_first[buf.rows_of(0, 12)] == 12 and buf.ep_last[buf.rows_of(0, 13)] == 13
    batch = buf.sample(400)  # relabelled with the final goal of each row's own episode
    here = CODEC.read(batch.obs.numpy(), "achieved_goal")[:320, 0]
    goal = CODEC.read(batch.obs.numpy(), "desired_goal")[:320, 0]
    last = np.select([here < 5, here < 14, here < 23], [5.0, 14.0, 23.0], 25.0)
    np.testing.assert_array_equal(goal, last)


@pytest.mark.parametrize("how,why", [("die", "its process was killed by SIGSEGV"),
                                     ("hang", "hung: its step did not return within "
                                              "env.step_timeout_s=1")])
def test_a_subprocess_that_dies_or_hangs_is_replaced(how, why):
    cfg = from_dict({}, SETS + fail_once(1, 3, how) + ["env.vectorization=async",
                                                       "env.num_envs=2", "env.step_timeout_s=1",
                                                       "algo.ppo.minibatch_size=16"])
    envs = make_vector_env(cfg.env, 2, [0, 1])
    try:
        first, _ = envs.reset(seed=[SEED, SEED + 1])
        last = first
        for _ in range(3):
            obs, rewards, terminated, truncated, info = envs.step(np.zeros(2, np.int64))
            if truncated[1]:
                break
            last = obs
    finally:
        envs.close()
    cut, made = restart_marks(info, 2)
    assert cut is not None and list(cut) == [False, True]
    assert made == [(1, why)]
    assert rewards[1] == 0 and not terminated[1]
    np.testing.assert_allclose(info["final_obs"][1], last[1])
    np.testing.assert_allclose(obs[1], reset_obs(fresh_seed(SEED + 1, RESPAWNED, 1)))
    assert not truncated[0]


def test_an_envpool_that_fails_is_made_again_whole():
    pytest.importorskip("envpool")
    from hpcrl.envs.backends.envpool import EnvPoolVectorEnv

    cfg = from_dict({}, ["env.backend=envpool", "env.num_envs=2", "algo.ppo.minibatch_size=16"])
    envs = EnvPoolVectorEnv(cfg.env, 2, max_restarts=3)
    first, _ = envs.reset(seed=[SEED, SEED + 1])

    def broken(*args, **kwargs):
        raise RuntimeError("the pool broke (injected)")

    envs.pool.recv = broken
    envs.step_async(np.zeros(2, np.int64))
    obs, rewards, terminated, truncated, info = envs.step_wait()
    cut, made = restart_marks(info, 2)
    assert cut is not None and cut.all() and truncated.all() and not terminated.any()
    assert len(made) == 2 and "the pool broke (injected)" in made[0][1]
    np.testing.assert_allclose(np.stack(info["final_obs"]), first)
    again = EnvPoolVectorEnv(cfg.env, 2)
    fresh, _ = again.reset(seed=[fresh_seed(s, IN_PLACE, 1) for s in (SEED, SEED + 1)])
    np.testing.assert_allclose(obs, fresh)
    envs.close()
    again.close()


def test_an_env_that_keeps_failing_fails_its_collector_naming_it():
    with pytest.raises(EnvRestartsExhausted, match=(
            r"env \d \(global index\) was made again 3 times within 1000 of its steps, more "
            r"than env.max_restarts=2 allows .*its last error: RuntimeError: the env crashed "
            r"in step \(injected\) \(in step\)")):
        collect(["env.id=hpcrl_crashing:CrashingCartPole-v0", "env.kwargs={p_crash: 1.0}",
                 "env.max_restarts=2"])
    with pytest.raises(EnvFailure, match=(  # restarts off: the env's own error, named
            r"^one of the envs 0-\d \(global index\) failed: RuntimeError: the env crashed "
            r"in step \(injected\) \(env.max_restarts=0: restarts are off\)$")):
        collect(["env.id=hpcrl_crashing:CrashingCartPole-v0", "env.kwargs={p_crash: 1.0}",
                 "env.max_restarts=0"])


CRASHING = ["env.id=hpcrl_crashing:CrashingCartPole-v0",
            "env.kwargs={p_crash: 0.005, p_crash_reset: 0.02}", "algo.ppo.num_epochs=2",
            "train.total_env_steps=1024", "train.checkpoint_every=100", "algo.optimizer_eps=1e-3"]


def test_restarts_do_not_depend_on_how_the_envs_are_grouped(tmp_path):
    one = trained(tmp_path, "one", SETS + CRASHING + ["scheme.env_groups=1"])
    two = trained(tmp_path, "two", SETS + CRASHING + ["scheme.env_groups=2"])
    assert_same(one, two)
    counts = [sum(float(r["env_restarts"]) for r in csv.DictReader(open(tmp_path / n /
                                                                         "progress.csv")))
              for n in ("one", "two")]
    assert counts[0] == counts[1] > 0
