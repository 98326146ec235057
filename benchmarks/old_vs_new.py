"""The same training jobs on two source trees of hpcrl in one run: is the new tree slower?

Four jobs, each run as a user runs it (``python -m hpcrl.cli train --set ...``, under
``mpiexec -n <world size>`` where ``hpcrl plan`` asks for more than one rank), in a process
of its own with ``PYTHONPATH=<tree>`` and ``OMP_NUM_THREADS=1``:

1. ``ppo-serial``: PPO on CartPole-v1, the embedded default config;
2. ``async-ppo``: ``scheme.preset=async-ppo`` on CartPole-v1 (3 ranks);
3. ``dqn-serial``: ``algo.name=dqn`` on CartPole-v1;
4. ``sac-serial``: ``algo.name=sac`` on Pendulum-v1 (a progress row every 250 env steps).

Every job has a fixed env-step budget and leaves out what a timing does not need (no
evaluation, no TensorBoard, no console lines). The figure is env steps per second of the
training, read from the run's ``progress.csv`` from its first row to its last: start-up
(imports, env and network construction) and the first update are left out, the same for
both trees; each run's whole process wall-clock is printed beside it. Old and new alternate
(old first on even repeats, new first on odd ones) and the table gives the median over the
repeats with the ratio new/old (above 1: the new tree is faster).

The trees: new is the tree this script lives in (``--new PATH`` for another); old is a git
revision checked out into a temporary ``git worktree`` (removed at the end), by default the
parent of the commit that deleted ``hpcrl/placement/serial_offpolicy.py`` (the one-lifecycle
commit, where issue 44's rework began); ``--old REV`` picks another.

    nice -n 10 python benchmarks/old_vs_new.py                # 3 repeats, ~6-8 minutes
    python benchmarks/old_vs_new.py --quick                   # 1 repeat, small budgets
    python benchmarks/old_vs_new.py --old main~20 --jobs sac-serial --repeats 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from machine import machine_line
from mpi_scaling import LIGHT, command, plan, progress_rows, steps_per_second, train_argv

ROOT = Path(__file__).resolve().parents[1]
# the module whose deletion marks the start of issue 44's one-lifecycle rework
LIFECYCLE_MARKER = "hpcrl/placement/serial_offpolicy.py"
COMPARABLE = ("Only ratios from one machine in one run compare: the figures move with the "
              "CPU, its other tenants and the libraries' kernels.")


@dataclass(frozen=True)
class Job:
    """A training job: its ``--set`` keys and env-step budgets (full run, ``--quick``)."""

    name: str
    what: str
    sets: tuple[str, ...]
    budget: int
    quick_budget: int


JOBS = (
    Job("ppo-serial", "PPO, CartPole-v1, default config", (), 20_480, 4_096),
    Job("async-ppo", "scheme.preset=async-ppo, CartPole-v1", ("scheme.preset=async-ppo",),
        30_720, 8_192),
    Job("dqn-serial", "DQN, CartPole-v1", ("algo.name=dqn",), 12_288, 4_096),
    Job("sac-serial", "SAC, Pendulum-v1", ("algo.name=sac", "env.id=Pendulum-v1",
                                          "algo.num_steps=250"), 1_250, 750),
)


@dataclass(frozen=True)
class Tree:
    """A source tree of hpcrl and what names it in the output."""

    label: str
    path: Path
    revision: str

    def environment(self) -> dict[str, str]:
        """The process environment of a job on this tree: its hpcrl first on the path (the
        caller's PYTHONPATH replaced, so no other tree's modules leak in), one thread."""
        return {**os.environ, "PYTHONPATH": str(self.path), "OMP_NUM_THREADS": "1"}


def git(repo: Path, *args: str, refusal: str = "") -> str:
    """A git command's stdout in ``repo``; a failing one stops the benchmark with
    ``refusal`` (git's own message without one)."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(refusal or f"git {' '.join(args)} failed in {repo}: "
                                    f"{done.stderr.strip()}")
    return done.stdout.strip()


def describe(repo: Path, revision: str) -> str:
    """``<short hash> <date> <subject>`` of a revision."""
    return git(repo, "show", "-s", "--date=short", "--format=%h %ad %s", revision)


def default_old_revision(repo: Path) -> str:
    """The parent of the first commit that deleted :data:`LIFECYCLE_MARKER`: the last tree
    before issue 44's one-lifecycle rework."""
    deletions = git(repo, "log", "--diff-filter=D", "--format=%H", "--",
                    LIFECYCLE_MARKER).split()
    if not deletions:
        raise SystemExit(f"no commit of {repo} deletes {LIFECYCLE_MARKER}: pass --old REV "
                         "(a commit, branch or tag) to name the old tree")
    return git(repo, "rev-parse", f"{deletions[-1]}^")


def new_tree(path: Path) -> Tree:
    """The tree at ``path`` (its HEAD, marked dirty when it has uncommitted changes)."""
    path = path.resolve()
    if not (path / "hpcrl" / "__init__.py").is_file():
        raise SystemExit(f"{path} holds no hpcrl package (hpcrl/__init__.py): pass --new "
                         "the root of an hpcrl source tree")
    dirty = " + uncommitted changes" if git(path, "status", "--porcelain", "--",
                                            "hpcrl") else ""
    return Tree("new", path, describe(path, "HEAD") + dirty)


@contextmanager
def old_tree(repo: Path, revision: str) -> Iterator[Tree]:
    """``revision`` checked out into a temporary git worktree of ``repo``, removed after."""
    commit = git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}",
                 refusal=f"--old {revision} names no commit of {repo}: pass a commit, branch "
                         "or tag of that repository")
    with tempfile.TemporaryDirectory(prefix="hpcrl-old-") as tmp:
        path = (Path(tmp) / "tree").resolve()
        git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
        try:
            if not (path / "hpcrl" / "__init__.py").is_file():
                raise SystemExit(f"revision {revision} holds no hpcrl package")
            yield Tree("old", path, describe(repo, commit))
        finally:
            git(repo, "worktree", "remove", "--force", str(path))


def check_imports(tree: Tree) -> None:
    """Refuse a tree whose jobs would import hpcrl from elsewhere."""
    # from a directory of no tree, as every job runs: ``python -c`` puts its cwd first
    with tempfile.TemporaryDirectory() as neutral:
        done = subprocess.run([sys.executable, "-c", "import hpcrl; print(hpcrl.__file__)"],
                              capture_output=True, text=True, env=tree.environment(),
                              cwd=neutral)
    found = done.stdout.strip()
    if done.returncode != 0 or not Path(found).resolve().is_relative_to(tree.path):
        raise SystemExit(f"the {tree.label} tree's jobs import hpcrl from {found or '?'}, not "
                         f"{tree.path}: {done.stderr.strip()[-400:]}")


def job_sets(job: Job, quick: bool, seed: int) -> list[str]:
    """A job's ``--set`` keys: its own, its budget, the seed, and :data:`LIGHT`."""
    budget = job.quick_budget if quick else job.budget
    return [*LIGHT, *job.sets, f"train.total_env_steps={budget}", f"seed={seed}"]


def world_size(tree: Tree, job: Job) -> int:
    """The ranks ``hpcrl plan`` of ``tree`` gives ``job`` (its refusal stops the benchmark
    before any timing)."""
    return int(plan(None, [*LIGHT, *job.sets], tree.environment())["world_size"])


@dataclass(frozen=True)
class Timed:
    """One run: env steps/s of its training (progress.csv) and its process wall-clock."""

    steps_per_s: float
    wall_s: float


def run_job(tree: Tree, job: Job, ranks: int, sets: list[str], timeout_s: float) -> Timed:
    """Train ``job`` on ``tree`` once in a fresh run directory; a failing job stops the
    benchmark with the end of its stderr."""
    with tempfile.TemporaryDirectory(prefix="hpcrl-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = command(ranks, run_dir, sets) if ranks > 1 else train_argv(run_dir, sets)
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=tree.environment(), cwd=tmp, text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{job.name} on the {tree.label} tree ran past {timeout_s:.0f} s "
                             "(--job-timeout)") from None
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{job.name} on the {tree.label} tree failed (status "
                             f"{done.returncode}): {' '.join(cmd)}\n{done.stderr[-1500:]}")
        return Timed(steps_per_second(progress_rows(run_dir)), wall)


def print_table(jobs: list[Job], results: dict[tuple[str, str], list[Timed]]) -> None:
    """One line a job: the median env steps/s of each tree and the ratio new/old."""
    print(f"\n{'job':<12} {'old env steps/s':>16} {'new env steps/s':>16} {'new/old':>8}")
    for job in jobs:
        old, new = (statistics.median(t.steps_per_s for t in results[(job.name, label)])
                    for label in ("old", "new"))
        print(f"{job.name:<12} {old:16,.0f} {new:16,.0f} {new / old:8.3f}")


def parse_args() -> argparse.Namespace:
    names = [job.name for job in JOBS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", metavar="REV",
                        help="git revision of the old tree (default: the parent of the commit "
                             f"that deleted {LIFECYCLE_MARKER})")
    parser.add_argument("--new", metavar="PATH", type=Path, default=ROOT,
                        help="the new tree (default: the tree holding this script)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each job on each tree (default 3; the median is shown)")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat and small budgets: a smoke run, not a figure")
    parser.add_argument("--jobs", nargs="+", choices=names, default=names,
                        help="which jobs to run (default: all)")
    parser.add_argument("--job-timeout", type=float, default=600.0, metavar="SECONDS",
                        help="wall-clock bound of one run (default 600)")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    return args


def main() -> None:
    args = parse_args()
    new = new_tree(args.new)
    jobs = [job for job in JOBS if job.name in args.jobs]
    print(machine_line(), flush=True)
    print(COMPARABLE)
    with old_tree(new.path, args.old or default_old_revision(new.path)) as old:
        trees = {"old": old, "new": new}
        for tree in trees.values():
            print(f"{tree.label}: {tree.revision} ({tree.path})")
            check_imports(tree)
        ranks = {(job.name, label): world_size(tree, job)
                 for job in jobs for label, tree in trees.items()}
        print(f"{args.repeats} repeat(s){', quick budgets' if args.quick else ''}; figure: "
              "env steps/s of progress.csv's first row to its last (start-up excluded), "
              "median over repeats; wall: the whole process")
        for job in jobs:
            budget = job.quick_budget if args.quick else job.budget
            world = ranks[(job.name, "new")]
            print(f"  {job.name}: {job.what}, {budget:,} env steps, "
                  f"{'serial' if world == 1 else f'mpiexec -n {world}'}")
        print(f"\n{'repeat':>6} {'job':<12} {'tree':<4} {'env steps/s':>12} {'wall s':>7}")
        results: dict[tuple[str, str], list[Timed]] = {}
        for repeat in range(args.repeats):
            order = ("old", "new") if repeat % 2 == 0 else ("new", "old")
            for job in jobs:
                sets = job_sets(job, args.quick, seed=repeat)
                for label in order:
                    timed = run_job(trees[label], job, ranks[(job.name, label)], sets,
                                    args.job_timeout)
                    results.setdefault((job.name, label), []).append(timed)
                    print(f"{repeat:>6} {job.name:<12} {label:<4} {timed.steps_per_s:12,.0f} "
                          f"{timed.wall_s:7.1f}", flush=True)
    print_table(jobs, results)
    print(COMPARABLE)


if __name__ == "__main__":
    main()
