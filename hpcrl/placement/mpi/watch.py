"""Every rank's watch for lost ranks (:class:`~hpcrl.comm.faults.FailureWatch`), set up for
its job: which ranks it may lose, how it names them, and how the job ends on a loss it
cannot survive."""
from __future__ import annotations

from typing import Any, Protocol

from hpcrl.comm import abort_job, set_expendable
from hpcrl.comm.faults import FailureWatch, PeerInfo, failed_ranks, lost_rank_message
from hpcrl.scheme import COLLECTOR, SPARE, RankRole


class WatchedJob(Protocol):
    """What a rank's watch for lost ranks reads of its job: the world and rank table, which
    ranks it may lose (whether it survives lost collectors), how it names them (their roles
    in words, their hosts), rank 0's spares, and where its lines go."""

    world: Any
    table: list[RankRole]
    survives: bool
    peers: list[PeerInfo] | None
    spares: Any

    @property
    def rank(self) -> int:
        """This rank in the world."""

    @property
    def is_leader(self) -> bool:
        """Whether this is rank 0, which says what was lost."""

    def describe_rank(self, rank: int) -> str:
        """Rank ``rank``'s role in words."""

    def say(self, line: str) -> None:
        """A line on this rank's standard error."""


def watch_failures(job: WatchedJob) -> FailureWatch:
    """Start this rank's watch for dead ranks. In a job that survives lost collectors a
    collector's own failure ends it alone, any other rank's loss ends the job, and rank 0
    says one line per lost collector. In any other job under Open MPI's ULFM, where a dead
    rank does not end the job by itself, any loss ends the job, and a job another rank
    ended (:mod:`hpcrl.comm.job_end`) ends this rank with status 1."""
    def expendable(rank: int) -> bool:
        return job.survives and job.table[rank].role in (COLLECTOR, SPARE)

    def describe(rank: int) -> str:
        host = job.peers[rank].host if job.peers is not None else "?"
        return f"{job.describe_rank(rank)} on {host}"

    def essential_lost() -> str | None:
        dead = sorted(r for r in failed_ranks(job.world) if not expendable(r))
        if not dead:
            return None
        return lost_rank_message(dead[0], describe(dead[0]), job.survives)

    def tell(line: str) -> None:
        job.say(f"hpcrl: {line}")

    say = tell if job.is_leader else None  # rank 0 alone says what was lost

    set_expendable(expendable(job.rank), essential_lost)
    return FailureWatch(job.world, expendable, describe,
                        lambda message: abort_job(job.world, message), say,
                        survives=job.survives,
                        on_lost=None if job.spares is None else job.spares.on_lost).start()
