"""The policies a job trains and acts with: a list, holding one policy today.

A job of several policies (self-play, leagues) gives each its name, its algorithm (and with
it the algorithm's family and wiring) and the learner ranks that train it, its learner
group. Today every job has one policy, ``main``, learnt by every learner rank of the
scheme: :func:`job_policies` returns it alone, and what a rank reads of "the" algorithm it
reads through the policy its role serves (:attr:`~hpcrl.placement.job.RankJob.policy`), so
that a second policy is a second entry, not a second code path. A job of one policy looks
exactly as before: its config, ``hpcrl plan``, checkpoints and progress files name no
policy.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hpcrl.algorithms import algorithm_type
from hpcrl.algorithms.family import Family, FamilyWiring
from hpcrl.components.import_paths import load
from hpcrl.scheme import RankRole

MAIN = "main"  # the name of a job's one policy


@dataclass(frozen=True)
class JobPolicy:
    """One policy of a job: its ``name``, its algorithm's class (built in or a plug-in), and
    the world ranks of its learner group (``learner_ranks``: the updater and gradient
    workers that train it)."""

    name: str
    algorithm: Any
    learner_ranks: tuple[int, ...]

    @property
    def family(self) -> Family:
        """The family its algorithm's class declares."""
        family: Family = self.algorithm.family
        return family

    @cached_property
    def wiring(self) -> FamilyWiring:
        """What its family runs on ranks, found through the declaration (as every plug-in
        is: :attr:`~hpcrl.algorithms.family.Family.wiring`)."""
        wiring: FamilyWiring = load(self.family.wiring, "algo.name")
        return wiring


def job_policies(algo_name: str, table: list[RankRole]) -> tuple[JobPolicy, ...]:
    """The policies of a job whose algorithm is ``algo_name`` over the rank table ``table``:
    today one, :data:`MAIN`, learnt by every learner rank."""
    learners = tuple(r.rank for r in table if r.learner)
    return (JobPolicy(MAIN, algorithm_type(algo_name), learners),)
