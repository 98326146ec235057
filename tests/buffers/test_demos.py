"""`hpcrl eval RUN --record FILE`: the documented demonstration format, one row per step,
episodes back to back, the returns of the evaluation, and dict observations per key."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from hpcrl.buffers.demos.files import DemoRecorder, read_demos
from hpcrl.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.timeout(120)
def test_eval_records_its_episodes_as_a_demonstration_file(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    sets = [x for item in tiny_overrides for x in ("--set", item)]
    assert invoke("train", "--run-dir", run, *sets).exit_code == 0
    demos = tmp_path / "demos" / "cartpole.npz"
    out = invoke("eval", run, "-n", 3, "--json", "--record", demos)
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    data = read_demos(demos)
    assert sorted(data) == ["actions", "obs", "rewards", "terminated", "truncated"]
    ends = np.flatnonzero(data["terminated"] | data["truncated"])
    assert len(ends) == 3 and ends[-1] == len(data["rewards"]) - 1  # 3 whole episodes
    assert result["record_steps"] == len(data["rewards"]) == data["obs"].shape[0]
    assert data["obs"].shape[1:] == (4,) and data["actions"].dtype.kind == "i"
    # the rewards of each episode sum to the return the evaluation reported for it
    starts = np.concatenate([[0], ends[:-1] + 1])
    returns = [float(data["rewards"][a:b + 1].sum()) for a, b in zip(starts, ends, strict=False)]
    assert returns == pytest.approx(result["returns"])
    # the rows are the episodes: the first observation of each is its reset, seeded as
    # the evaluation seeds it, so recording them again gives the same file
    again = tmp_path / "again.npz"
    assert invoke("eval", run, "-n", 3, "--record", again).exit_code == 0
    assert np.array_equal(read_demos(again)["obs"], data["obs"])


def test_dict_observations_are_written_per_key_and_bad_files_are_named(tmp_path):
    recorder = DemoRecorder(2)
    for episode in (1, 0):  # played interleaved, written in episode order
        for t in range(2 + episode):
            recorder.step(episode, {"pos": np.full(2, episode, np.float32),
                                    "goal": np.full(3, t, np.float32)},
                          np.array([0.5, -0.5]), 1.0, t == 1 + episode, False)
    path = tmp_path / "dict.npz"
    assert recorder.write(path) == 5
    data = read_demos(path)
    assert data["obs/pos"].shape == (5, 2) and data["obs/goal"].shape == (5, 3)
    assert data["obs/pos"][:, 0].tolist() == [0, 0, 1, 1, 1]
    assert data["terminated"].tolist() == [False, True, False, False, True]
    np.savez(tmp_path / "bad.npz", obs=np.zeros(3), actions=np.zeros(3))
    with pytest.raises(ValueError, match="lacks rewards, terminated, truncated"):
        read_demos(tmp_path / "bad.npz")
    np.savez(tmp_path / "open.npz", obs=np.zeros(2), actions=np.zeros(2), rewards=np.zeros(2),
             terminated=np.zeros(2, bool), truncated=np.zeros(2, bool))
    with pytest.raises(ValueError, match="last episode does not end"):
        read_demos(tmp_path / "open.npz")


def test_a_record_file_that_is_not_npz_is_refused_before_playing(tmp_path):
    out = CliRunner().invoke(main, ["eval", str(tmp_path), "--record", str(tmp_path / "x.csv")])
    assert out.exit_code != 0 and "ends in .npz" in out.output
