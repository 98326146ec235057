"""Every rank's watch for lost ranks (:class:`~hpcrl.comm.faults.FailureWatch`), set up for
its job: which ranks it may lose, how it names them, and how the job ends on a loss it
cannot survive."""
from __future__ import annotations

from hpcrl.comm import abort_job, set_expendable
from hpcrl.comm.faults import FailureWatch, failed_ranks, lost_rank_message
from hpcrl.placement.job import RankJob
from hpcrl.scheme import COLLECTOR, SPARE


def watch_failures(job: RankJob) -> FailureWatch:
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
