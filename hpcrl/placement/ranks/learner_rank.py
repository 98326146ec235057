"""The one learner rank: every gradient worker of every scheme, of both families.

A learner rank holds the job's algorithm and learns update by update in the one learner loop
(:func:`~hpcrl.learning.loop.run_learner`), whatever the placement (one process, or a rank
of an MPI job), the scheme, or the family. What differs between the families is the data
path that feeds the algorithm, which the algorithm's declared family builds
(:attr:`~hpcrl.algorithms.algorithm.Algorithm.family`, through its wiring; never looked up
or branched on here):

* ``"rollouts"`` (PPO, A2C, IMPALA, plug-ins on the on-policy base):
  :class:`~hpcrl.placement.wiring.rollout_updates.RolloutUpdates`, a storage that holds one
  update's rollouts, read in minibatch epochs, each gradient taking the scheme's route;
* ``"replay"`` (DQN, DDPG, TD3, SAC, MPO, MPC, plug-ins on the off-policy base):
  :class:`~hpcrl.placement.wiring.replay_updates.ReplayUpdates`, a replay read at the replay
  ratio while the collectors' chunks stream in.

The updater of a central or asynchronous scheme is the one role of its own beside it
(:mod:`~hpcrl.placement.ranks.updater_ranks`): the scheme, not the algorithm, needs it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from hpcrl.exchange.protocol import Control, Report
from hpcrl.learning.loop import UpdateControl, run_learner
from hpcrl.numerics.compiling import compile_loss
from hpcrl.numerics.reducer import ReducerSlot
from hpcrl.placement.leader import Leader

if TYPE_CHECKING:  # annotations only
    import torch

    from hpcrl.algorithms.algorithm import Algorithm
    from hpcrl.algorithms.family import FamilyWiring
    from hpcrl.numerics.reducer import Reducer
    from hpcrl.sections.schema import TrainConfig


class LearnerJob(Protocol):
    """What a learner rank reads of its job itself: the algorithm (built on its device),
    the ``train`` section (``compile``) and its family's wiring, which builds the data path
    from the job (and reads of it what that data path declares)."""

    device: torch.device

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section (``compile``)."""

    @property
    def wiring(self) -> FamilyWiring:
        """The wiring of the family of this rank's policy (its data path)."""

    def new_algorithm(self, reducer: Reducer | None = None) -> Algorithm:
        """The job's algorithm on its device, its statistics reduced by ``reducer``."""


class DataPath(Protocol):
    """A family's updates (what :class:`LearnerRank` drives): built from the job, the
    checkpoint to resume from, rank 0's leader (None elsewhere) and the algorithm."""

    actor: Any

    def control(self) -> UpdateControl:
        """Who decides after each update."""
        ...

    def start(self) -> None:
        """Publish the first weights."""
        ...

    def learn_update(self) -> Report:
        """Learn one update; this rank's report of it."""
        ...

    def end_update(self, control: Control) -> None:
        """Publish the weights carrying the decision; checkpoint when it asks."""
        ...

    def release(self) -> None:
        """After an error in one process: close the envs it collects with itself."""
        ...

    def finish(self) -> None:
        """After the last update: close what the data path opened."""
        ...


class LearnerRank:
    """A learner rank of any scheme and either family (see the module): the algorithm, its
    data path, and the learner loop over them."""

    def __init__(self, job: LearnerJob, resume: dict[str, Any] | None,
                 leader: Leader | None) -> None:
        self.job, self.leader = job, leader
        # minibatch statistics cross the gradient workers through a reducer that the data
        # path binds once the algorithm exists (a GPU all-reducer is sized by its weights)
        self.reducer = ReducerSlot()
        self.algorithm = job.new_algorithm(self.reducer)
        if job.train.compile:
            compile_loss(self.algorithm, job.device)
        # the data path of the algorithm's family, as its wiring builds it
        self.updates: DataPath = job.wiring.data_path(job, resume, leader, self.algorithm,
                                                      self.reducer)
        self.actor = self.updates.actor
        self.preempted = False
        self.env_failed = False

    def start(self) -> None:
        """Publish the first weights."""
        self.updates.start()

    def learn_update(self) -> Report:
        """Learn one update on the family's data path."""
        return self.updates.learn_update()

    def end_update(self, control: Control) -> None:
        """Act on the update's decision (publish, checkpoint)."""
        self.updates.end_update(control)

    def release(self) -> None:
        """After an error in one process: close the envs it collects with itself."""
        self.updates.release()

    def finish(self) -> None:
        """Close the data path, then rank 0's final evaluation."""
        self.updates.finish()
        if self.leader is not None:
            self.leader.finish(self.actor)

    def run(self) -> None:
        """Update until STOP (:func:`~hpcrl.learning.loop.run_learner`), deciding as the data
        path says (rank 0's leader, or an asynchronous updater)."""
        run_learner(self, self.updates.control())
