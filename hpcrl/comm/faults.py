"""Surviving a lost rank: which MPI library can, and which ranks this process has lost.

An asynchronous learner never waits for one particular collector, so a job can go on when
a collector rank dies (its node fails, its env segfaults, the OOM killer takes it) instead
of ending and losing the work since the last checkpoint. That needs an MPI whose ranks
outlive a peer: Open MPI 5 with its User-Level Failure Mitigation on (``mpiexec --with-ft
ulfm``). There, an operation that involves a dead rank raises an ``MPI.Exception`` of class
``ERR_PROC_FAILED`` instead of ending the job, and ``Comm.Get_failed`` lists the ranks the
library knows are dead. MPICH 4 and 5 end the whole job on the first message after a
rank died (its fault-tolerance variables assert), and an Open MPI job started without
``--with-ft ulfm`` ends too: :func:`survival_problem` says so, and the job keeps failing fast.

:data:`LOST` is this process's record of the ranks it gave up on (dead, or hung past
``scheme.collector_timeout_s``) and why; :class:`FailureWatch` is the thread that keeps it
up to date from the library's own failure list, ends the job when a rank it cannot do
without is lost, and has rank 0 say one line per lost rank.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcrl.comm._mpi import Comm, try_mpi
from hpcrl.comm.job_end import flush_output, is_revocation, leave_revoked, ulfm_enabled

DEAD = "dead"  # why a rank MPI counts dead was lost (a hung one's why says more)
TAG_LOST = 40  # a collector's last words to rank 0 (why it is leaving), pickled
WATCH_PERIOD_S = 0.25  # how often the watch asks the library which ranks died
NOTICE_GRACE_S = 1.0  # how long rank 0 waits for a dead rank's last words before its line


def survival_problem() -> str | None:
    """None where this MPI lets ranks outlive a dead peer; else why not, naming the library
    and what would (a sentence for the start-up notice)."""
    MPI = try_mpi()
    if MPI is None:
        return "MPI is not available"
    library = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    if "Open MPI" in library:
        if ulfm_enabled():
            if MPI.Query_thread() < MPI.THREAD_MULTIPLE:  # the failure watch is a thread
                return (f"{library} runs without MPI_THREAD_MULTIPLE, which hpcrl's watch "
                        f"for lost ranks needs (mpi4py.rc.thread_level = 'multiple')")
            return None
        return (f"{library} was started without its fault tolerance: launch with "
                f"`mpiexec --with-ft ulfm` to survive a lost collector")
    return (f"{library.split(',')[0]} ends the whole job when a rank dies; Open MPI 5 "
            f"started with `mpiexec --with-ft ulfm` survives a lost collector")


def watches_for_revocation() -> bool:
    """Whether every rank of a job needs a :class:`FailureWatch`, whatever its scheme: under
    Open MPI's ULFM a dead rank does not end the job by itself, and a rank that ends it
    revokes the world instead of aborting (:mod:`hpcrl.comm.job_end`), which the others
    learn through their watch (a thread: MPI_THREAD_MULTIPLE is needed)."""
    MPI = try_mpi()
    return (MPI is not None and ulfm_enabled()
            and MPI.Query_thread() >= MPI.THREAD_MULTIPLE)


def failure_classes() -> frozenset[int]:
    """The MPI error classes that mean a peer is dead (empty where MPI lacks them)."""
    MPI = try_mpi()
    if MPI is None:
        return frozenset()
    names = ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING")
    return frozenset(int(getattr(MPI, n)) for n in names if hasattr(MPI, n))


def is_peer_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an MPI error saying a peer of the operation is dead. A revoked
    communicator is not: another rank ended the job, and this rank leaves too (the abort
    handler and the failure watch see to it)."""
    MPI = try_mpi()
    if MPI is None or not isinstance(exc, MPI.Exception) or is_revocation(exc):
        return False
    return exc.Get_error_class() in failure_classes()


@dataclass(frozen=True)
class PeerInfo:
    """Where a rank runs: its host and process id (to name it, and to stop a hung one)."""

    host: str
    pid: int


def gather_peers(world: Comm) -> list[PeerInfo]:
    """Every rank's host and pid, in rank order (collective over ``world``)."""
    found = world.allgather((socket.gethostname(), os.getpid()))
    return [PeerInfo(host, pid) for host, pid in found]


class LostRanks:
    """The ranks this process gave up on, and why; shared by its threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._why: dict[int, str] = {}
        self.enabled = False  # set where the job survives lost collectors

    def mark(self, rank: int, why: str) -> bool:
        """Record ``rank`` as lost; True the first time."""
        with self._lock:
            if rank in self._why:
                return False
            self._why[rank] = why
            return True

    def __contains__(self, rank: object) -> bool:
        with self._lock:
            return rank in self._why

    def why(self, rank: int) -> str | None:
        """Why ``rank`` was given up on (None: it was not)."""
        with self._lock:
            return self._why.get(rank)

    def ranks(self) -> set[int]:
        """The lost ranks."""
        with self._lock:
            return set(self._why)

    def clear(self) -> None:
        """Forget every loss (a new job in this process, as the tests run them)."""
        with self._lock:
            self._why.clear()
        self.enabled = False


LOST = LostRanks()


def failed_ranks(world: Comm) -> set[int]:
    """The ranks of ``world`` the MPI library knows are dead (a local query)."""
    group = world.Get_failed()
    try:
        n = group.Get_size()
        if n == 0:
            return set()
        MPI = try_mpi()
        assert MPI is not None
        world_group = world.Get_group()
        try:
            return {int(r) for r in MPI.Group.Translate_ranks(group, list(range(n)),
                                                               world_group)}
        finally:
            world_group.Free()
    finally:
        group.Free()


def await_deaths(world: Comm, ranks: set[int], within_s: float = 10.0) -> None:
    """Wait (driving MPI's progress) until the library counts every rank of ``ranks`` dead,
    at most ``within_s``: a hung rank killed at the end of the job is dead for MPI a moment
    later, and the job's last meeting must not start before."""
    MPI = try_mpi()
    if MPI is None or not ranks:
        return
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            world.Iprobe(MPI.ANY_SOURCE, TAG_LOST)
        except Exception as exc:
            if not is_peer_failure(exc):
                raise
            world.Ack_failed()
        if ranks <= failed_ranks(world):
            return
        time.sleep(0.05)


def live_agreement(world: Comm, lost: set[int]) -> None:
    """Meet every live rank of ``world``: MPI's fault-tolerant agreement (ULFM's
    ``MPIX_Comm_agree``), entered once the library counts the ``lost`` ranks dead (a hung
    rank killed just now is dead for MPI a moment later). It completes alike on every live
    rank, whatever died before or during it, so no rank leaves before all have arrived."""
    await_deaths(world, lost)
    for _ in range(world.Get_size()):  # each try that fails has learnt of one more death
        try:
            world.Ack_failed()  # the deaths known so far do not fail the agreement
            world.Agree(1)
            return
        except Exception as exc:
            if not is_peer_failure(exc):
                raise
            # a rank died during the agreement: it completed alike on every live rank,
            # which all try again with that death acknowledged


def lost_rank_message(rank: int, description: str, survives: bool) -> str:
    """What ends a job that lost ``rank`` (``description``: its role and host), a rank it
    cannot go on without; ``survives``: whether the job goes on without lost collectors."""
    why = ("a job goes on only without collectors" if survives else
           "this job cannot go on without it (only an asynchronous job under `mpiexec "
           "--with-ft ulfm` goes on without a lost collector)")
    return f"rank {rank} ({description}) was lost: {why}; resume it from its last checkpoint"


def stop_hung_rank(peer: PeerInfo) -> bool:
    """SIGKILL a hung rank when it runs on this host (then MPI counts it dead and the job's
    end does not wait for it); False where it runs elsewhere."""
    if peer.host != socket.gethostname():
        return False
    try:
        os.kill(peer.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class FailureWatch:
    """A daemon thread that turns the library's list of dead ranks into :data:`LOST`.

    ``expendable(rank)``: whether the job goes on without that rank (a collector); a lost
    rank that is not ends the job at once through ``end_job(message)``; ``on_lost(rank)``
    hears of each expendable one (rank 0's spares take their places) and may say what
    becomes of it (the end of its line). On rank 0,
    ``say(line)`` reports each lost rank once, with the last words it sent (an exception's
    message) or, where it sent none, that it was killed without a word. ``survives``: the
    job goes on without lost collectors (else the watch is there to end it on any loss).
    """

    def __init__(self, world: Comm, expendable: Callable[[int], bool],
                 describe: Callable[[int], str], end_job: Callable[[str], None],
                 say: Callable[[str], None] | None, survives: bool = True,
                 on_lost: Callable[[int], str | None] | None = None) -> None:
        self.world, self.expendable, self.describe = world, expendable, describe
        self.survives = survives
        # told of every expendable rank MPI counts dead (once each); what it says becomes
        # the end of that rank's line (a spare takes its place)
        self.on_lost = on_lost
        self.fates: dict[int, str] = {}
        self.end_job, self.say = end_job, say
        self.notices: dict[int, str] = {}
        # whose last words this rank takes (rank 0: every expendable rank), and whose
        # probe drives progress elsewhere (rank 0, the one rank every job has)
        size, rank = world.Get_size(), world.Get_rank()
        self.listen = ([r for r in range(size) if expendable(r)] if rank == 0 else [0])
        self.seen: dict[int, float] = {}  # rank -> when its death was first seen
        self.reported: set[int] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hpcrl-failure-watch",
                                       daemon=True)

    def start(self) -> FailureWatch:
        """Start watching; returns self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (before the job's last collective) and wait for it; then say the
        lines of ranks lost too late for their last words' grace."""
        self._stop.set()
        self.thread.join(timeout=5.0)
        self.check(final=True)

    def _run(self) -> None:
        while not self._stop.wait(WATCH_PERIOD_S):
            self.check()

    def _take_notices(self) -> None:
        """Receive the last words sent to this rank (rank 0), one source at a time: a probe
        of any source would fail until the failure is acknowledged, which only the main
        thread does (``Ack_failed`` from this thread was seen to block). The probes also
        drive MPI's progress, which is how the library learns of deaths while the main
        thread steps envs."""
        MPI = try_mpi()
        assert MPI is not None
        status = MPI.Status()
        for source in self.listen:
            if source in self.seen:
                continue
            try:
                while self.world.Iprobe(source, TAG_LOST, status):
                    self.notices[source] = str(self.world.recv(source=source, tag=TAG_LOST))
            except Exception as exc:  # that source is dead: its words came or never will
                if is_revocation(exc):
                    leave_revoked()  # another rank ended the job and said why
                if not is_peer_failure(exc):
                    raise

    def _ended_elsewhere(self) -> bool:
        """Whether another rank ended the job by revoking the world (under ULFM: see
        :mod:`hpcrl.comm.job_end`). A probe of this rank's own messages drives MPI's
        progress, which is how a revocation reaches a rank that listens to no one, and
        fails with ``ERR_REVOKED`` once it has."""
        MPI = try_mpi()
        assert MPI is not None
        try:
            self.world.Iprobe(self.world.Get_rank(), TAG_LOST)
        except Exception as exc:
            if is_revocation(exc):
                return True
            if not is_peer_failure(exc):
                raise
        return False

    def check(self, final: bool = False) -> None:
        """One look: new dead ranks recorded (or the job ended), rank 0's lines said (at
        once when ``final``). A job another rank ended leaves this rank with status 1."""
        if self._ended_elsewhere():
            leave_revoked()
        self._take_notices()  # also drives MPI's progress, which learns of deaths
        dead = failed_ranks(self.world)
        now = time.monotonic()
        for rank in sorted(dead - set(self.seen)):
            self.seen[rank] = now
            if not self.expendable(rank):
                live = sorted(set(range(self.world.Get_size())) - dead)
                says = bool(live) and live[0] == self.world.Get_rank()  # one line, not all
                self.end_job(lost_rank_message(rank, self.describe(rank), self.survives)
                             if says else "")
                return
            LOST.mark(rank, DEAD)
            fate = self.on_lost(rank) if self.on_lost is not None else None
            if fate is not None:
                self.fates[rank] = fate
        for rank in sorted(set(self.seen) - self.reported):
            words = self.notices.get(rank)
            if words is None and now - self.seen[rank] < NOTICE_GRACE_S and not final:
                continue  # its last words may still be on their way
            self.reported.add(rank)
            if LOST.why(rank) not in (None, DEAD):
                continue  # a hung rank its learner killed: that learner said why
            if self.say is not None:
                how = (f"failed: {words}" if words is not None else
                       "died without a word (killed by SIGKILL or the OOM killer, a "
                       "crash such as a segfault, or its node lost)")
                fate = self.fates.get(rank, "the job goes on without it")
                self.say(f"rank {rank} ({self.describe(rank)}) {how}"
                         + ("" if final else f"; {fate}"))


def send_last_words(world: Comm, why: str) -> None:
    """A collector leaving on an error tells rank 0 why before it dies (best effort)."""
    try:
        world.send(why, dest=0, tag=TAG_LOST)
    except Exception:
        pass


def die_as_lost() -> None:
    """End this rank as a crash does (SIGKILL), which Open MPI's fault tolerance turns into
    a dead peer for the others; an exit with a status would make its launcher wait."""
    os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)  # not reached


def request_failed(channel: Any, request: Any) -> tuple[bool, bool]:
    """``(done, dead)`` of one test of ``request`` on ``channel`` (a
    :class:`~hpcrl.comm.channel.Channel`): dead when its peer is lost."""
    try:
        return channel.test(request), False
    except Exception as exc:
        if is_peer_failure(exc):
            return False, True
        raise


class _ExitCode:
    """The status the process is leaving with (set by the CLI as it exits)."""

    code: int = 0


EXIT_CODE = _ExitCode()


def record_exit(code: object) -> None:
    """Note the status of a ``SystemExit`` the process leaves with (``sys.exit``'s rules:
    None is 0, an integer itself, anything else 1)."""
    EXIT_CODE.code = 0 if code is None else code if isinstance(code, int) else 1


def leave_without_finalize() -> None:
    """End the process at exit without ``MPI_Finalize``, with the status it leaves with.

    After a rank of the job was lost, Open MPI 5.0's ``MPI_Finalize`` was seen to spin for
    ever now and then (in about one job in ten, every live rank in it, the job's work all
    done), also on ranks that had not yet heard of the loss; so every rank of a job that
    survives lost ranks leaves this way, after the job's last meeting. For the launcher
    (ULFM on) it is one more rank that exited: the job still ends with status 0. This exit
    hook runs before mpi4py's own (exit hooks run last registered first) and ends the
    process there, its output flushed.
    """
    def leave() -> None:
        flush_output()
        os._exit(EXIT_CODE.code)

    atexit.register(leave)
