"""The learner loop every placement runs: the order of its steps, the command bits, and that
each placement's learner goes through it."""
from __future__ import annotations

import pytest

from hpcrl.config.loader import from_dict
from hpcrl.exchange.protocol import CHECKPOINT, CONTROL_LAYOUT, PREEMPTED, STOP, ReportLayout
from hpcrl.learning.loop import run_learner
from hpcrl.placement.ranks.job_control import JobControl
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir


class ScriptedLearner:
    """Writes down what the loop asks of it, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.preempted = False
        self.layout = ReportLayout(())

    def start(self) -> None:
        self.calls.append("start")

    def learn_update(self):
        self.calls.append("learn")
        return self.layout.new()

    def end_update(self, control) -> None:
        self.calls.append(f"end {int(control.command)} preempted={self.preempted}")

    def finish(self) -> None:
        self.calls.append("finish")


class ScriptedControl:
    """Decides the commands of a script, one per update."""

    def __init__(self, commands: list[int]) -> None:
        self.commands = list(commands)
        self.reports = 0

    def decide(self, report):
        self.reports += 1
        control = CONTROL_LAYOUT.new()
        control.set(command=self.commands.pop(0), env_steps=100 * self.reports)
        return control


def test_the_loop_learns_decides_and_acts_until_stop_then_finishes_once():
    learner = ScriptedLearner()
    run_learner(learner, ScriptedControl([0, CHECKPOINT, 0, STOP | CHECKPOINT]))
    assert learner.calls == ["start",
                             "learn", "end 0 preempted=False",
                             "learn", f"end {CHECKPOINT} preempted=False",
                             "learn", "end 0 preempted=False",
                             "learn", f"end {STOP | CHECKPOINT} preempted=False",
                             "finish"]


def test_a_stop_signal_marks_the_learner_preempted_before_it_acts():
    learner = ScriptedLearner()
    command = STOP | CHECKPOINT | PREEMPTED
    run_learner(learner, ScriptedControl([0, command]))
    assert learner.calls[-2:] == [f"end {command} preempted=True", "finish"]
    assert learner.preempted


def test_a_failing_update_ends_the_loop_without_finishing():
    # a failure propagates (the placement's abort handler or the CLI reports it): no final
    # evaluation of a half-done update
    learner = ScriptedLearner()

    def fails():
        raise RuntimeError("update failed")

    learner.learn_update = fails
    with pytest.raises(RuntimeError, match="update failed"):
        run_learner(learner, ScriptedControl([0]))
    assert learner.calls == ["start"]


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_serial_run_of_either_family_goes_through_the_loop(algo, tmp_path, monkeypatch):
    # the serial trainer is a job of one rank: the same loop and the same control as a
    # job's learner ranks, its leader deciding with the run's writer: one decision per
    # update, a checkpoint with the last, the budget's rows written
    decisions = []
    real_decide = JobControl.decide

    def counted(self, report):
        control = real_decide(self, report)
        decisions.append(int(control.command))
        return control

    monkeypatch.setattr(JobControl, "decide", counted)
    sets = {"ppo": ["algo.num_steps=64", "algo.ppo.minibatch_size=64"],
            "dqn": ["algo.num_steps=64", "replay.learning_starts=128"]}[algo]
    config = from_dict({"algo": {"name": algo}, "env": {"id": "CartPole-v1", "num_envs": 2},
                        "train": {"total_env_steps": 512, "eval_episodes": 0,
                                  "checkpoint_every": 2}}, sets)
    trainer = Trainer(config, RunDir(tmp_path / "run"), console=None)
    trainer.train()
    updates = trainer.writer.updates
    assert len(decisions) == updates >= 2
    assert decisions[-1] & STOP and decisions[-1] & CHECKPOINT
    assert [bool(c & CHECKPOINT) for c in decisions[:-1]] == [
        (i + 1) % 2 == 0 for i in range(updates - 1)]
    lines = (tmp_path / "run" / "progress.csv").read_text().splitlines()
    assert len(lines) == 1 + updates
