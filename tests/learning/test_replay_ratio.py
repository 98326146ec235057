"""One replay-ratio rule for every off-policy placement (hpcrl.learning.replay_loop): a
round of ``replay.gradient_steps`` steps for every multiple of ``replay.train_freq`` steps
of ``env.num_envs`` envs past ``replay.learning_starts``, counted in steps taken."""
from __future__ import annotations

import csv

from hpcrl.config import from_dict
from hpcrl.placement.serial_run import train
from hpcrl.runtime.checkpoint import load_checkpoint

SETS = ["algo.name=dqn", "env.num_envs=2", "actor.hidden_sizes=[16,16]", "algo.num_steps=25",
        "replay.batch_size=16", "replay.train_freq=3", "replay.gradient_steps=2",
        "train.eval_episodes=0", "train.tensorboard=false"]


def test_a_serial_run_trains_a_round_at_every_multiple_past_learning_starts(tmp_path):
    # learning_starts is no multiple of a round's 6 env steps: the first round is at 66
    train(from_dict({}, SETS + ["replay.learning_starts=61", "train.total_env_steps=1000"]),
          tmp_path, console=None)
    state = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    learner = state["placement"]["updater"]["learner"]
    rounds = 1000 // 6 - 61 // 6  # the multiples of 6 in (61, 1000]
    assert learner["steps_taken"] == learner["algorithm"]["steps"] == 2 * rounds
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    per_row = [float(r["replay_ratio"]) * 50 for r in rows]  # a row: 25 steps of 2 envs
    assert round(sum(per_row)) == 2 * rounds
    assert per_row[0] == 0 and per_row[1] > 0  # the first row ends at 50, before 61
