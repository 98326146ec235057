"""A member's step: publish, decide, copy and mutate, record; and a toy population in which
exploit-and-explore beats training alone."""
from __future__ import annotations

import json
import math
import os
import random
import statistics
from pathlib import Path

import pytest

from hpcrl.errors import ConfigError
from hpcrl.population.explore import initial_values
from hpcrl.population.lineage import Lineage
from hpcrl.population.member import Member
from hpcrl.population.workspace import write_text_atomic
from hpcrl.sections.pbt_section import KeyRange, PbtConfig

LR = KeyRange(1e-5, 1e-1, "log")
SETTINGS = PbtConfig(members=4, interval_env_steps=100, mutate={"lr": LR})


def checkpoint(tmp_path: Path, member: int, skill: float) -> Path:
    path = tmp_path / f"run_{member}" / "ckpt.json"
    write_text_atomic(path, json.dumps({"skill": skill}))
    return path


def four(tmp_path: Path, seed: int = 0) -> list[Member]:
    return [Member(SETTINGS, tmp_path / "population", m, seed=seed, clock=lambda: 1.0)
            for m in range(4)]


def test_the_worst_member_copies_the_best_and_mutates_its_values(tmp_path):
    members = four(tmp_path)
    for m, member in enumerate(members[1:], start=1):
        assert member.step(100, float(m), {"lr": 1e-4 * m}, checkpoint(tmp_path, m, m)).stay
    decision = members[0].step(100, 0.0, {"lr": 5e-5, "batch": 64.0},
                               checkpoint(tmp_path, 0, 0.0))
    assert not decision.stay and decision.copy_from == 3
    assert decision.checkpoint is not None
    assert json.loads(decision.checkpoint.read_text()) == {"skill": 3.0}
    assert decision.hyperparameters["batch"] == 64.0
    assert decision.hyperparameters["lr"] != 3e-4 and LR.low <= decision.hyperparameters["lr"]
    [row] = members[0].lineage.rows()
    assert (row.member, row.copied_from, row.key, row.old) == (0, 3, "lr", 5e-5)
    assert row.new == decision.hyperparameters["lr"] and (row.score, row.leader_score) == (0, 3)
    assert members[0].lineage.merged_path.read_text().count("\n") == 2


def test_without_exploit_the_worst_member_publishes_and_stays(tmp_path):
    from dataclasses import replace
    members = [Member(replace(SETTINGS, exploit=False), tmp_path / "population", m,
                      clock=lambda: 1.0) for m in range(4)]
    for m, member in enumerate(members[1:], start=1):
        member.step(100, float(m), {"lr": 1e-4 * m}, checkpoint(tmp_path, m, m))
    decision = members[0].step(100, 0.0, {"lr": 5e-5}, checkpoint(tmp_path, 0, 0.0))
    assert decision.stay and decision.hyperparameters == {"lr": 5e-5}
    assert members[0].lineage.rows() == [] and members[0].workspace.read(0) is not None


def test_a_leader_whose_checkpoint_is_gone_is_passed_over(tmp_path):
    members = four(tmp_path)
    members[3].step(100, 3.0, {"lr": 1e-3}, tmp_path / "lost.pt")  # never written
    assert members[0].step(100, 0.0, {"lr": 1e-3}, checkpoint(tmp_path, 0, 0.0)).stay
    assert members[0].lineage.rows() == []


def test_a_requeued_member_resumes_its_interval_count(tmp_path):
    member = four(tmp_path)[2]
    assert not member.due(99) and member.due(100)
    member.step(100, 1.0, {"lr": 1e-3}, checkpoint(tmp_path, 2, 1.0))
    again = Member(SETTINGS, tmp_path / "population", 2)
    assert again.last_env_steps == 100 and not again.due(150) and again.due(200)


def test_decisions_are_the_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    def run(where: Path, seed: int) -> list[tuple]:
        members, made = four(where, seed), []
        for step in (100, 200, 300):
            for m, member in enumerate(members):
                decision = member.step(step, float(m), {"lr": 1e-3},
                                       checkpoint(where, m, float(m)))
                made.append((decision.copy_from, decision.hyperparameters["lr"]))
        return made
    assert run(tmp_path / "a", 1) == run(tmp_path / "b", 1)
    assert run(tmp_path / "a", 1) != run(tmp_path / "c", 2)


def test_bad_member_ids_keys_and_objectives_are_named(tmp_path):
    with pytest.raises(ConfigError, match="member 4 is not one"):
        Member(SETTINGS, tmp_path, 4)
    member = Member(SETTINGS, tmp_path, 0)
    with pytest.raises(ConfigError, match="pbt.mutate names lr"):
        member.step(100, 1.0, {"learning_rate": 1e-3}, tmp_path / "c.pt")
    assert member.score({"mean_return": 3.5, "episodes": 4}) == 3.5
    with pytest.raises(ConfigError, match="use one of episodes"):
        member.score({"episodes": 4})
    with pytest.raises(ConfigError, match="pbt.members"):
        Member(PbtConfig(members=1, mutate={"lr": LR}), tmp_path, 0)


BEST_LR = 3e-3


def gain(lr: float) -> float:
    """The toy: skill gained in an interval, 1 at BEST_LR, less the further lr is from it on a
    log scale (a tenth as much two thirds of a decade away)."""
    return math.exp(-2 * math.log10(lr / BEST_LR) ** 2)


def simulate(where: Path, seed: int, exploit: bool, intervals: int = 20) -> list[tuple]:
    """A population of 4 trained in turns, with the same initial lrs (drawn from the range
    by seed) with or without exploit-and-explore; each member's final (skill, lr)."""
    members = [Member(SETTINGS, where / "population", m, seed=seed) for m in range(4)]
    lrs = [initial_values(SETTINGS, random.Random(f"{seed}/{m}"))["lr"] for m in range(4)]
    skills = [0.0] * 4
    for interval in range(1, intervals + 1):
        for m, member in enumerate(members):
            skills[m] += gain(lrs[m])
            saved = checkpoint(where, m, skills[m])
            if not exploit:
                continue
            decision = member.step(interval * 100, skills[m], {"lr": lrs[m]}, saved)
            if not decision.stay:
                assert decision.checkpoint is not None
                skills[m] = json.loads(decision.checkpoint.read_text())["skill"]
                lrs[m] = decision.hyperparameters["lr"]
    return list(zip(skills, lrs, strict=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exploit_and_explore_beats_training_alone(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # hundreds of files: keep it quick
    alone = simulate(tmp_path / "alone", seed, exploit=False)
    pbt = simulate(tmp_path / "pbt", seed, exploit=True)
    assert pbt == simulate(tmp_path / "again", seed, exploit=True)  # one seed, one outcome
    mean_alone = statistics.mean(skill for skill, _ in alone)
    mean_pbt = statistics.mean(skill for skill, _ in pbt)
    assert mean_pbt > 1.2 * mean_alone, (mean_alone, mean_pbt)
    assert max(skill for skill, _ in pbt) >= max(skill for skill, _ in alone)

    def spread(population: list[tuple]) -> float:  # how far the lrs are from the best one
        return statistics.median(abs(math.log10(lr / BEST_LR)) for _, lr in population)
    assert spread(pbt) < spread(alone)
    copies = Lineage(tmp_path / "pbt" / "population").rows()
    assert copies and all(LR.low <= row.new <= LR.high for row in copies)
