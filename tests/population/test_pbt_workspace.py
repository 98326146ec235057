"""The workspace: atomic snapshots, peers' files read without trust, checkpoints copied."""
from __future__ import annotations

import os

import pytest

from hpcrl.population.workspace import Snapshot, Workspace, write_atomic, write_text_atomic


def snap(member: int, env_steps: int = 100, score: float = 1.0, checkpoint: str = "") -> Snapshot:
    return Snapshot(member, env_steps, score, {"algo.lr": 1e-3}, checkpoint, time=5.0)


def test_a_published_snapshot_reads_back(tmp_path):
    space = Workspace(tmp_path)
    space.publish(snap(2, score=float("nan")))
    back = space.read(2)
    assert back is not None and back.member == 2 and back.hyperparameters == {"algo.lr": 1e-3}
    assert back.rank_score == float("-inf")
    assert space.read(3) is None


def test_a_reader_never_sees_a_torn_file(tmp_path):
    path = tmp_path / "member_000.json"
    write_text_atomic(path, snap(0).to_json())
    before = path.read_text()

    def half_then_killed(f):
        f.write(b'{"member": 0, "env_')
        assert path.read_text() == before  # the reader's file is the old one throughout
        raise KeyboardInterrupt  # the writer dies before the rename

    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, half_then_killed)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["member_000.json"]  # no temp left


def test_torn_corrupt_missing_and_misplaced_peer_files_are_skipped(tmp_path):
    space = Workspace(tmp_path)
    for member in (0, 1):
        space.publish(snap(member))
    (tmp_path / "member_002.json").write_text('{"member": 2, "env_steps": 1')  # torn
    (tmp_path / "member_003.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "member_004.json").write_text('{"member": 4, "env_steps": "many"}')
    (tmp_path / "member_005.json").write_text("[1, 2]")
    (tmp_path / "member_006.json").write_text(snap(1).to_json())  # 1's file under 6's name
    (tmp_path / "member_007.json").mkdir()  # not even a file
    assert [s.member for s in space.peers(0)] == [1]
    assert [s.member for s in space.snapshots()] == [0, 1]
    assert Workspace(tmp_path / "absent").snapshots() == []


def test_adopt_copies_the_leaders_checkpoint_into_the_members_place(tmp_path):
    space = Workspace(tmp_path / "population")
    checkpoint = tmp_path / "leader.pt"
    checkpoint.write_bytes(b"weights" * 1000)
    copy = space.adopt(snap(1, checkpoint=str(checkpoint)), member=0)
    assert copy == space.member_dir(0) / "from_leader.pt"
    assert copy.read_bytes() == checkpoint.read_bytes()
    checkpoint.write_bytes(b"newer")  # the leader goes on: the copy is the member's
    assert copy.read_bytes() == b"weights" * 1000


def test_adopt_of_a_vanished_checkpoint_is_none(tmp_path):
    space = Workspace(tmp_path)
    assert space.adopt(snap(1, checkpoint=str(tmp_path / "gone.pt")), member=0) is None
    assert not space.member_dir(0).exists() or not any(space.member_dir(0).iterdir())


def test_leftover_temporary_files_of_a_killed_writer_are_discarded(tmp_path):
    space = Workspace(tmp_path)
    space.publish(snap(0))
    (tmp_path / f".member_000.json.tmp-{os.getpid() + 1}").write_text("half")
    (tmp_path / ".member_001.json.tmp-1").write_text("another member's, in flight")
    space.member_dir(0).mkdir()
    (space.member_dir(0) / ".from_leader.pt.tmp-7").write_bytes(b"half")
    space.discard_leftovers(0)
    names = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert names == [".member_001.json.tmp-1", "member_000.json"]
