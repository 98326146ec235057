"""The gradient-worker role: turns the rollouts of an update into a sequence of gradients.

It owns the rollout storage and the algorithm's loss. Between two gradients of one update
the caller must hand it the weights those gradients produced (:meth:`load_weights`), from
an updater in another process or from its own optimiser in a decentralised update.
"""
from __future__ import annotations

from collections.abc import Generator, Sequence

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.buffers.rollout import Rollout
from hpcrl.buffers.rollout_storage import RolloutStorage
from hpcrl.buffers.vtrace_storage import VTraceStorage
from hpcrl.exchange.messages import Gradient, Weights
from hpcrl.numerics.normalization import Moments, merge_moments


def rollout_moments(rollouts: Sequence[Rollout]) -> tuple[Moments, Moments]:
    """Observation and return moments of several rollouts, merged."""
    obs_parts, ret_parts = zip(*(r.moments() for r in rollouts), strict=True)
    return merge_moments(list(obs_parts)), merge_moments(list(ret_parts))


class GradientWorker:
    """Computes the gradients of one update, one :class:`Gradient` per optimiser step."""

    def __init__(self, algorithm: OnPolicyAlgorithm, storage: RolloutStorage | VTraceStorage,
                 seed: int, total_envs: int, minibatches: int) -> None:
        self.algorithm, self.storage = algorithm, storage
        self.seed, self.total_envs, self.num_minibatches = seed, total_envs, minibatches
        self.weights_version = 0
        actor = algorithm.actor
        self.message = Gradient.for_actor(actor, len(algorithm.stat_names))

    def load_weights(self, weights: Weights) -> None:
        """Load ``weights`` into the algorithm's actor and note their version (what the next
        gradients say they were computed with)."""
        weights.load_into(self.algorithm.actor)
        self.weights_version = weights.version

    def gradients(self, rollouts: Sequence[Rollout], update: int,
                  progress: float) -> Generator[Gradient, None, None]:
        """The gradients of update number ``update`` on ``rollouts``.

        ``progress`` (in [0, 1], the job's env steps including these rollouts over the
        budget) sets the schedules; callers compute it the same way on every process.
        """
        self.algorithm.prepare_rollouts(rollouts, self.total_envs)  # (PPO+D's log-probs)
        intrinsic = self.algorithm.intrinsic
        parts = (None if intrinsic is None else
                 intrinsic.prepare(rollouts, self.seed, update, self.total_envs,
                                   self.storage.device))
        if parts is None:
            self.storage.load(rollouts)
        else:
            # RND runs on GAE batches only (config's check_rnd), held by a RolloutStorage
            assert isinstance(self.storage, RolloutStorage)
            self.storage.load(rollouts, parts)
        new_steps = self.storage.num_samples
        progress = min(max(progress, 0.0), 1.0)
        self.algorithm.set_progress(progress)
        names = self.algorithm.stat_names
        merged: tuple[Moments, ...] = rollout_moments(rollouts)
        if intrinsic is not None:
            # RND's input and return moments travel beside them (prepare() set them)
            assert intrinsic.moments is not None
            merged = merged + intrinsic.moments
        moments: tuple[Moments, ...] | None = merged  # sent with the first gradient only
        batches = self.algorithm.minibatches(self.storage, update, self.seed, self.total_envs,
                                             self.num_minibatches)
        try:
            for batch in batches:
                grads, stats = self.algorithm.compute_gradients(batch)
                yield self.message.fill(grads, self.weights_version, batch.num_samples,
                                        new_steps if moments else 0, progress,
                                        [stats[n] for n in names], moments)
                moments = None
        finally:  # also when the caller stops early
            self.storage.release()
