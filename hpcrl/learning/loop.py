"""The learner loop: one for every placement, family and transport.

Every learner of a run, whether it is the one process of a serial run or a rank of an MPI
job, on-policy or off-policy, repeats the same steps per update:

1. **learn an update** (:meth:`Learner.learn_update`): the on-policy worker gathers its
   rollouts and takes each gradient step; the replay learner takes chunks and trains the
   rounds its replay ratio asks for; the central updater applies the workers' gradients;
2. **record it and agree on the command** (:meth:`UpdateControl.decide`): the run's writer
   writes the update's row and decides, the same way for every placement
   (:meth:`~hpcrl.learning.run_writer.RunWriter.command`), whether to go on, checkpoint, or
   stop (and why). In one process the learner asks its writer (:class:`WriterControl`);
   in a job, rank 0's leader decides and every learner rank receives the decision;
3. **act on it** (:meth:`Learner.end_update`): publish the new weights carrying the command
   and, when asked, write the checkpoint with every role's state;
4. stop after the update whose command says ``STOP``, then :meth:`Learner.finish`.

:func:`run_learner` is that loop. What differs between learners (how an update is learnt,
where the weights go, how collector states reach a checkpoint) is theirs; the order of the
steps and the meaning of the command bits are the loop's, so a serial run and every rank of a
job checkpoint, stop and report a stop signal at the same update.
"""
from __future__ import annotations

from typing import Protocol

from torch import nn

from hpcrl.exchange.protocol import (
    CONTROL_LAYOUT,
    ENV_FAILED,
    PREEMPTED,
    STOP,
    Control,
    Report,
    ReportLayout,
    update_row,
)
from hpcrl.learning.run_writer import RunWriter


class Learner(Protocol):
    """What :func:`run_learner` drives, one update at a time. ``preempted`` is set by the
    loop after each update: a stop signal (or too few live collectors) ended the run before
    its budget; ``env_failed`` too when an env that failed for good stopped it."""

    preempted: bool
    env_failed: bool

    def start(self) -> None:
        """Before the first update: publish the first weights."""
        ...

    def learn_update(self) -> Report:
        """Learn one update; returns this learner's report of it."""
        ...

    def end_update(self, control: Control) -> None:
        """Act on the run's decision after an update: publish the weights carrying
        ``control.command`` and write the checkpoint when it asks for one."""
        ...

    def finish(self) -> None:
        """After the last update: close what the learner opened (the leader's final
        evaluation, transports)."""
        ...


class UpdateControl(Protocol):
    """Where an update's report is recorded and the run's command decided."""

    def decide(self, report: Report) -> Control:
        """Record ``report``'s update and return the run's decision (the same on every
        learner of the run)."""
        ...


def run_learner(learner: Learner, control: UpdateControl) -> None:
    """Run ``learner`` update by update until the run's command says ``STOP``."""
    learner.start()
    while True:
        decision = control.decide(learner.learn_update())
        command = int(decision.command)
        learner.preempted = bool(command & PREEMPTED)
        learner.env_failed = bool(command & ENV_FAILED)
        learner.end_update(decision)
        if command & STOP:
            break
    learner.finish()


class WriterControl:
    """The decision of a run's writer, taken where the update's figures are: by the one
    learner of a serial run, and by rank 0's leader of a job for every learner rank.
    ``actor`` (when set) is the policy the evaluations during training copy."""

    def __init__(self, writer: RunWriter, layout: ReportLayout,
                 actor: nn.Module | None = None) -> None:
        self.writer, self.layout, self.actor = writer, layout, actor

    def record(self, figures: dict[str, float], gradient_asynchrony: float = 0.0) -> None:
        """Write one update's row from its combined ``figures``
        (:meth:`~hpcrl.exchange.protocol.ReportLayout.combine` of the learners' reports) and
        hand the policy to an evaluation during training when one is due."""
        self.writer.add_update(*update_row(figures, self.layout.stat_names,
                                             gradient_asynchrony))
        if self.actor is not None:
            self.writer.after_update(self.actor)

    def command(self) -> Control:
        """The decision after the update just recorded: the writer's command and the run's
        env steps so far."""
        control = CONTROL_LAYOUT.new()
        control.set(command=self.writer.command(), env_steps=self.writer.env_steps)
        return control

    def decide(self, report: Report) -> Control:
        """Record the one learner's ``report`` and decide."""
        self.record(self.layout.combine(report.data[None, :]))
        return self.command()

