"""The updater role: applies gradients to the master weights and publishes new versions."""
from __future__ import annotations

from typing import Any

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.exchange.messages import Gradient, Weights


class Updater:
    """Owns the optimiser; every applied gradient makes a new weights version."""

    def __init__(self, algorithm: OnPolicyAlgorithm) -> None:
        self.algorithm = algorithm
        self.version = 0
        self.message = Weights.empty_like(algorithm.policy)
        self.last_stats: dict[str, float] = {}

    def weights(self) -> Weights:
        """The current master weights as a message (valid until the next apply)."""
        return self.message.capture(self.algorithm.policy, self.version)

    def step(self, gradient: Gradient) -> None:
        """One optimiser step with ``gradient``.

        The normaliser moments a gradient carries are merged too: they change only what the
        collectors see next, since training uses the observations as they were collected
        (and they come from env data checked finite, so they merge even when a non-finite
        gradient is dropped under ``train.on_nonfinite=skip_update``).
        """
        self.algorithm.set_progress(gradient.progress)
        self.last_stats = self.algorithm.apply_gradients(gradient.grads,
                                                         step=self.version + 1)
        if gradient.moments.carried:  # the first gradient of an update
            actor = self.algorithm.actor
            stats = [actor.obs_rms, actor.ret_rms]
            rnd = getattr(actor, "rnd", None)
            if rnd is not None:  # RND's inputs and returns
                stats += [rnd.obs_rms, rnd.ret_rms]
            for running, moments in zip(stats, gradient.moments.read(), strict=True):
                if moments.count > 0:
                    running.merge(moments)
        self.version += 1

    def state_dict(self) -> dict[str, Any]:
        """The weights version and the algorithm's state, for a checkpoint."""
        return {"version": self.version, "algorithm": self.algorithm.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.version = int(state["version"])
        self.algorithm.load_state_dict(state["algorithm"])
