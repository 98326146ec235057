"""Seeding by global env index: one seed repeats a run, env indices differ, and a resume from
a checkpoint continues the seed sequence."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from ma_envs import Relay, random_legal

from hpcrl.envs.multiagent.named_envs import adapt
from hpcrl.envs.multiagent.seat_vector import SeatVector
from hpcrl.envs.multiagent.seeding import EpisodeSeeds, episode_seed


def _relays(seed: int, first_index: int, count: int) -> SeatVector:
    return SeatVector([adapt(Relay(), seed, first_index + i) for i in range(count)])


def _trajectory(envs: SeatVector, steps: int, rng_seed: int = 0) -> list[np.ndarray]:
    """Every observation, reward and acting mask of ``steps`` random-legal steps."""
    rng = np.random.default_rng(rng_seed)
    step = envs.reset()
    seen = []
    for _ in range(steps):
        seen += [step.acting.copy(), step.rewards.copy(), *(step.obs[s] for s in envs.seats)]
        step = envs.step(random_legal(step.masks, envs.seats, rng))
    return seen


def test_the_first_match_of_env_i_has_seed_plus_i_and_later_ones_differ():
    assert [episode_seed(10, i, 0) for i in range(3)] == [10, 11, 12]
    later = {episode_seed(10, i, k) for i in range(3) for k in range(1, 50)}
    assert len(later) == 3 * 49 and all(0 <= s < 2**31 for s in later)
    seeds = EpisodeSeeds(10, 2)
    assert [seeds.next() for _ in range(3)] == [(k, episode_seed(10, 2, k)) for k in range(3)]


def test_one_seed_repeats_the_trajectories_and_other_indices_differ():
    first = _trajectory(_relays(7, 0, 3), 12)
    again = _trajectory(_relays(7, 0, 3), 12)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    envs = _relays(7, 0, 3)
    _trajectory(envs, 12)
    seeds = [env.env.seeds_seen for env in envs.envs]
    assert seeds[0][0] == 7 and seeds[2][0] == 9  # the global index convention
    assert len({tuple(s) for s in seeds}) == 3
    other = _relays(7, 3, 3)
    _trajectory(other, 12)
    assert all(env.env.seeds_seen[0] == 10 + i for i, env in enumerate(other.envs))
    obs_a = _relays(7, 0, 1).reset().obs["a"]
    obs_b = _relays(7, 1, 1).reset().obs["a"]
    assert not np.array_equal(obs_a, obs_b)  # the seed shows in what the seats see


def test_a_resume_continues_the_seed_sequence():
    straight = _relays(3, 0, 2)
    _trajectory(straight, 40)  # 10 matches each (4 steps a match)
    interrupted = _relays(3, 0, 2)
    _trajectory(interrupted, 22)  # mid-way through match 5
    buffer = io.BytesIO()
    torch.save(interrupted.state(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    resumed = _relays(3, 0, 2)
    resumed.load_state(state)
    for old, new, again in zip(interrupted.envs, resumed.envs, straight.envs, strict=True):
        assert new.episode == old.episode + 1  # the interrupted match is never replayed
        assert new.env.seeds_seen == [again.env.seeds_seen[new.episode]]


def test_a_state_of_another_seed_or_env_is_refused():
    state = _relays(3, 0, 2).state()
    with pytest.raises(ValueError, match="the seed or the env layout changed"):
        _relays(4, 0, 2).load_state(state)
    with pytest.raises(ValueError, match="holds 2 multi-agent envs but this vector has 3"):
        _relays(3, 0, 3).load_state(state)
