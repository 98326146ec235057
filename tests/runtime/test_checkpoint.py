"""Checkpoints: atomic, safe to load, and a resume that ends exactly where an uninterrupted
run ends."""
import pytest
import torch
from kill_resume import rows, whole_then_killed_and_resumed

from hpcrl.config import from_dict
from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.checkpoint import CheckpointError, load_checkpoint, save_atomic
from hpcrl.runtime.run_dir import RunDir


def weights(run_dir):
    return load_checkpoint(RunDir(run_dir).checkpoint_path)["policy"]["state_dict"]


@pytest.mark.parametrize("agent", [[], ["actor.memory=gru", "actor.memory_size=8"],
                                   ["actor.memory=lstm", "actor.memory_size=8",
                                    "algo.name=a2c"], ["rnd.enabled=true"]],
                         ids=["mlp", "gru", "lstm-a2c", "rnd"])
def test_killed_and_resumed_run_ends_with_the_uninterrupted_weights(tmp_path, tiny_overrides,
                                                                    monkeypatch, agent):
    """Recurrent actors too: the collectors' states are in the checkpoint; RND's statistics
    are the actor's buffers, and its learner keeps no state of its own."""
    if "algo.name=a2c" in agent:  # A2C takes one step on whole rollouts: no PPO keys
        tiny_overrides = [s for s in tiny_overrides if not s.startswith("algo.ppo.")]
    cfg = from_dict({}, tiny_overrides + ["env.normalize_obs=true", "env.normalize_reward=true"]
                    + agent)
    def cut_after_the_checkpoint_at_8_and_two_more_rows(cut):
        assert len(rows(cut)) == 10

    whole_then_killed_and_resumed(cfg, tmp_path, monkeypatch, 10,
                                  cut_after_the_checkpoint_at_8_and_two_more_rows)
    whole, cut = weights(tmp_path / "whole"), weights(tmp_path / "cut")
    assert whole.keys() == cut.keys()
    for key in whole:
        assert torch.equal(whole[key], cut[key]), key
    assert rows(tmp_path / "whole") == rows(tmp_path / "cut")  # no repeated or missing rows
    assert [int(r["updates"]) for r in rows(tmp_path / "cut")] == list(range(1, 17))


def test_resume_gives_the_same_next_update(tmp_path, tiny_overrides):
    constant = tiny_overrides + ["algo.lr_schedule=constant", "algo.ppo.clip_schedule=constant"]
    Trainer(from_dict({}, constant), RunDir(tmp_path / "a"), console=None).train()
    short = from_dict({}, constant + ["train.total_env_steps=192"])  # stops after update 3
    Trainer(short, RunDir(tmp_path / "b"), console=None).train()
    run = RunDir(tmp_path / "b")
    Trainer(resume_config(run, ["train.total_env_steps=1024"]), run, resume=True,
            console=None).train()
    a, b = rows(tmp_path / "a"), rows(tmp_path / "b")
    assert a[3] == b[3]  # the first update after the resume
    assert a == b
    for key, value in weights(tmp_path / "a").items():
        assert torch.equal(value, weights(tmp_path / "b")[key]), key


@pytest.mark.parametrize("every_s, written", [(0.0, 1), (1e-9, 16)])
def test_checkpoints_come_by_the_clock_too(tmp_path, tiny_overrides, every_s, written):
    """train.checkpoint_every_s bounds what a crash costs when updates are long: with it due
    at every update, each of the 16 updates checkpoints (kept as steps-<n>.pt); with the
    clock off and train.checkpoint_every beyond the run, only the last one is written."""
    cfg = from_dict({}, tiny_overrides + ["train.checkpoint_every=1000",
                                          f"train.checkpoint_every_s={every_s}",
                                          "train.keep_checkpoints=100"])
    Trainer(cfg, RunDir(tmp_path / "run"), console=None).train()
    kept = sorted((tmp_path / "run" / "checkpoints").glob("steps-*.pt"))
    assert len(kept) == written, kept


def test_checkpoint_is_weights_only_and_atomic(tmp_path):
    path = save_atomic({"x": torch.ones(3), "n": 5}, tmp_path / "c.pt")
    assert load_checkpoint(path)["n"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]  # no temp files left


def test_crafted_checkpoint_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned"
    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    path = tmp_path / "evil.pt"
    torch.save({"format": "hpcrl-checkpoint/1", "payload": Evil()}, path)
    with pytest.raises(CheckpointError, match="cannot be read safely"):
        load_checkpoint(path)
    assert not marker.exists()


def test_missing_or_foreign_checkpoints_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "none.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not an hpcrl checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    (tmp_path / "trunc.pt").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "trunc.pt")


def test_resume_refuses_changes_the_state_cannot_follow(tmp_path, tiny_overrides):
    from hpcrl.config import ConfigError
    cfg = from_dict({}, tiny_overrides)
    Trainer(cfg, RunDir(tmp_path / "r"), console=None).train()
    with pytest.raises(ConfigError, match="cannot change on resume"):
        resume_config(RunDir(tmp_path / "r"), ["env.num_envs=8"])
    more = resume_config(RunDir(tmp_path / "r"), ["train.total_env_steps=2048"])
    assert more.train.total_env_steps == 2048


def test_writer_refuses_a_value_that_would_not_load_and_names_its_path(tmp_path):
    import numpy as np
    previous = save_atomic({"n": 1}, tmp_path / "c.pt")
    state = {"n": 2, "placement": {"collector": {"envs": [
        {"layers": []}, {"layers": [{"attrs": {"prev_shaping": np.float64(0.5)}}]}]}}}
    with pytest.raises(CheckpointError, match=r"placement\.collector\.envs\[1\]\.layers\[0\]"
                                              r"\.attrs\.prev_shaping: numpy\.float64"):
        save_atomic(state, previous)
    assert load_checkpoint(previous)["n"] == 1  # nothing was written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def test_checkpoints_with_numpy_scalars_load_but_other_classes_do_not(tmp_path):
    import datetime

    import numpy as np
    # what hpcrl wrote before env state was converted to plain data
    torch.save({"format": "hpcrl-checkpoint/1", "prev_shaping": np.float64(-1.5),
                "steps": torch.zeros(2)}, tmp_path / "numpy.pt")
    loaded = load_checkpoint(tmp_path / "numpy.pt")
    assert type(loaded["prev_shaping"]) is np.float64 and loaded["prev_shaping"] == -1.5
    torch.save({"format": "hpcrl-checkpoint/1",
                "payload": datetime.timedelta(days=1)}, tmp_path / "class.pt")
    with pytest.raises(CheckpointError, match="cannot be read safely"):
        load_checkpoint(tmp_path / "class.pt")
    torch.save({"format": "hpcrl-checkpoint/1", "array": np.zeros(3)}, tmp_path / "array.pt")
    with pytest.raises(CheckpointError, match="cannot be read safely"):
        load_checkpoint(tmp_path / "array.pt")
