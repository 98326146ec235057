"""Lineage: rows appended by several processes at once, merged; torn lines dropped."""
from __future__ import annotations

import multiprocessing

from hpcrl.population.lineage import COLUMNS, Lineage

ROWS_EACH = 25


def _append_many(population_dir: str, member: int) -> None:
    lineage = Lineage(population_dir)
    for i in range(ROWS_EACH):
        lineage.record(member, copied_from=(member + 1) % 4, env_steps=i, scores=(i, i + 1.0),
                       old={"lr": 1e-3, "clip": 0.2}, new={"lr": 2e-3, "clip": 0.25},
                       when=1000.0 + i + member / 10)
        lineage.write_merged()


def test_several_processes_record_at_once_and_every_row_is_whole(tmp_path):
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), m)) for m in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    rows = Lineage(tmp_path).rows()
    assert len(rows) == 4 * ROWS_EACH * 2
    assert [row.time for row in rows] == sorted(row.time for row in rows)
    for member in range(4):
        mine = [row for row in rows if row.member == member]
        assert [r.env_steps for r in mine if r.key == "lr"] == list(range(ROWS_EACH))
        assert {(r.key, r.old, r.new) for r in mine} == {("lr", 1e-3, 2e-3),
                                                          ("clip", 0.2, 0.25)}
    merged = Lineage(tmp_path).write_merged().read_text().splitlines()
    assert merged[0] == ",".join(COLUMNS) and len(merged) == 1 + len(rows)


def test_a_torn_last_line_is_dropped_and_cut_before_the_next_append(tmp_path):
    lineage = Lineage(tmp_path)
    lineage.record(0, 1, 10, (1.0, 2.0), {"lr": 1e-3}, {"lr": 2e-3}, when=1.0)
    path = lineage.member_path(0)
    with open(path, "a") as f:
        f.write("2.0,20,0,1,1.0,2.0,lr,0.001,0.00")  # killed mid-write: no newline
    assert [row.env_steps for row in lineage.rows()] == [10]
    lineage.record(0, 2, 30, (1.0, 3.0), {"lr": 1e-3}, {"lr": 4e-3}, when=3.0)  # requeued
    assert [(row.env_steps, row.copied_from) for row in lineage.rows()] == [(10, 1), (30, 2)]
    assert path.read_text().count("\n") == 3  # header and two rows, the torn one gone


def test_foreign_and_broken_lines_are_skipped(tmp_path):
    lineage = Lineage(tmp_path)
    lineage.record(1, 0, 10, (1.0, 2.0), {"lr": 1e-3}, {"lr": 2e-3}, when=1.0)
    with open(lineage.member_path(1), "a") as f:
        f.write("not,a,row\n1.0,ten,1,0,1.0,2.0,lr,0.1,0.2\n")
    lineage.member_path(2).write_bytes(b"\xff\xfe")
    assert len(lineage.rows()) == 1
    assert Lineage(tmp_path / "absent").rows() == []
