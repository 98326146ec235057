"""Collector ranks that come back (issue 46), in one process: the spare ranks of the rank
table, rank 0's pool that hands lost places to them, a learner's side that re-targets a
place, and the checkpoint states taken by place. The jobs that lose and replace collectors
under Open MPI's ULFM are in tests/placement/mpi/test_mpi_spares.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from hpcrl.comm.channel import LocalChannel
from hpcrl.comm.faults import LOST
from hpcrl.config import ConfigError, load_config
from hpcrl.exchange.protocol import TAG_ASSIGN, TAG_REPLACED, TAG_STATE
from hpcrl.placement.collector_states import collect_states
from hpcrl.placement.job import describe_role
from hpcrl.placement.mpi.spares import SparePool
from hpcrl.placement.takeovers import Takeovers
from hpcrl.scheme import COLLECTOR, SPARE, assign_roles, describe, required_world_size

ASYNC = ["scheme.preset=async-ppo", "scheme.collectors_per_worker=3", "algo.ppo.minibatch_size=192"]


def test_spares_come_last_in_the_rank_table_and_count_in_the_world():
    cfg = load_config(None, ASYNC + ["scheme.max_collector_restarts=2"])
    assert required_world_size(cfg.scheme) == 1 + 3 + 2
    table = assign_roles(6, cfg.scheme, cfg.env.num_envs)
    assert [r.role for r in table[-2:]] == [SPARE, SPARE]
    assert not any(r.collects or r.learner or r.num_envs for r in table[-2:])
    assert describe(cfg.scheme) == "1 gradient worker + 3 collectors + 2 spares"
    assert describe_role(table[-1]) == "spare collector"
    # the collectors' envs are where they were: the spares hold none until they take a place
    assert [r.env_offset for r in table if r.role == COLLECTOR] == [0, 8, 16]


@pytest.mark.parametrize("sets,message", [
    (["scheme.preset=a2c", "scheme.max_collector_restarts=1"],
     "a synchronous scheme waits for every collector and ends when one is lost"),
    (ASYNC + ["scheme.inference_ranks=1", "scheme.max_collector_restarts=1"],
     "an inference rank serves fixed slots of its collector ranks"),
    (ASYNC + ["scheme.gradients=async", "scheme.update=central",
              "scheme.max_collector_restarts=1"], "needs scheme.gradients=sync"),
    (ASYNC + ["scheme.max_collector_restarts=-1"], "must be >= 0"),
])
def test_replacements_where_they_cannot_work_are_refused(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, sets)


class FakeWorld:
    """What the pool asks of the world: pickled sends it keeps, already complete."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, int, int]] = []

    def isend(self, message: object, dest: int, tag: int) -> SimpleNamespace:
        self.sent.append((message, dest, tag))
        return SimpleNamespace(Test=lambda: True)


def fake_job(sets: list[str], size: int) -> SimpleNamespace:
    cfg = load_config(None, sets)
    table = assign_roles(size, cfg.scheme, cfg.env.num_envs)
    return SimpleNamespace(config=cfg, scheme=cfg.scheme, table=table, world=FakeWorld(),
                           workers=[0], describe_rank=lambda r: describe_role(table[r]),
                           survives=True, channel=LocalChannel(), collection_unit="rollout",
                           say=lambda line: None, peers=None)


@pytest.fixture
def lost_ranks():
    LOST.clear()
    yield LOST
    LOST.clear()


def test_rank_0_gives_a_lost_place_to_a_spare_then_says_none_is_left(lost_ranks):
    job = fake_job(ASYNC + ["scheme.max_collector_restarts=1"], 5)
    pool = SparePool(job)
    assert pool.standing() == 3
    fate = pool.on_lost(2)
    assert fate is not None and fate.startswith("rank 4 (spare) takes its place")
    assert (({"slot": 2, "incarnation": 1}, 4, TAG_ASSIGN) in job.world.sent)
    assert any(dest == 0 and tag == TAG_REPLACED and msg[:2] == (2, 4)
               for msg, dest, tag in job.world.sent)
    assert pool.holder(2) == 4 and pool.standing() == 3
    # the spare that took the place dies: no spare is left, the place stays empty
    fate = pool.on_lost(4)
    assert fate is not None and "no spare rank is left to take its place" in fate
    assert pool.holder(2) == 4 and pool.standing() == 2
    assert any(dest == 0 and tag == TAG_REPLACED and msg[:2] == (4, -1)
               for msg, dest, tag in job.world.sent)
    pool.on_lost(1)  # and the next loss too
    assert pool.standing() == 1
    pool.release()
    assert (None, 4, TAG_ASSIGN) in job.world.sent  # (a spare lost is not told)


def test_a_spare_that_dies_idle_leaves_the_pool(lost_ranks):
    job = fake_job(ASYNC + ["scheme.max_collector_restarts=2"], 6)
    pool = SparePool(job)
    pool.on_lost(4)
    assert pool.idle == [5]
    pool.on_lost(1)
    assert pool.holder(1) == 5
    lost_ranks.mark(5, "dead")
    pool.release()
    assert not any(dest == 5 and msg is None for msg, dest, tag in job.world.sent)


class FakeInbox:
    """A learner's inbox of collector ranks ``ranks``, recording each place re-targeted."""

    def __init__(self, ranks: list[int]) -> None:
        self.ranks, self.received, self.first_taken = list(ranks), [0] * len(ranks), {}
        self.replaced: list[tuple[int, int]] = []

    def replace(self, i: int, rank: int) -> None:
        self.replaced.append((i, rank))
        self.ranks[i] = rank


def test_a_learner_re_targets_a_place_once_it_is_free(lost_ranks):
    job = fake_job(ASYNC + ["scheme.max_collector_restarts=1"], 5)
    inbox = FakeInbox([1, 2, 3])
    moved: list[tuple[int, int]] = []
    sync = SimpleNamespace(replace=lambda old, new: moved.append((old, new)))
    mine = [1, 2, 3]
    held = {1}
    takeovers = Takeovers(job, inbox, sync, [mine], busy=lambda i: i in held)
    lost_ranks.mark(2, "dead")
    assert takeovers.awaiting()  # rank 0 has not said yet: a spare may come
    job.channel.send_object((2, 4, 0.0), 0, TAG_REPLACED)
    assert not takeovers.apply() and inbox.replaced == []  # its last rollout is still read
    held.clear()
    assert takeovers.apply()
    assert inbox.replaced == [(1, 4)] and moved == [(2, 4)] and mine == [1, 4, 3]
    assert not takeovers.awaiting()
    lost_ranks.mark(3, "dead")
    job.channel.send_object((3, -1, 0.0), 0, TAG_REPLACED)  # none left
    assert not takeovers.awaiting() and not takeovers.apply() and mine == [1, 4, 3]


def test_checkpoint_states_are_taken_by_place_and_for_this_checkpoint_alone(lost_ranks):
    job = fake_job(ASYNC + ["scheme.max_collector_restarts=1"], 5)
    job.scheme.collector_timeout_s = 0  # (wait for ever: nothing hangs here)
    holders = {1: 1, 2: 4, 3: 3}  # rank 4 took rank 2's place
    for offset, asked_by in ((0, 7), (8, 6), (8, 7), (16, 7)):  # (8, 6): a late answer
        job.channel.send_object({"env_offset": offset, "asked_by": asked_by}, 0, TAG_STATE)
    states = collect_states(job, 7, holders.__getitem__)
    assert sorted((s["env_offset"], s["asked_by"]) for s in states) == [(0, 7), (8, 7),
                                                                         (16, 7)]
    # a place whose holder is lost is not waited for
    lost_ranks.mark(4, "dead")
    job.channel.send_object({"env_offset": 0, "asked_by": 8}, 0, TAG_STATE)
    job.channel.send_object({"env_offset": 16, "asked_by": 8}, 0, TAG_STATE)
    assert sorted(s["env_offset"] for s in collect_states(job, 8, holders.__getitem__)) == [
        0, 16]
