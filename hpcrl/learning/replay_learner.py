"""The off-policy learner role: owns the replay and takes gradient steps on it.

It is the gradient worker and the updater of an off-policy agent in one object: chunks come
in through :meth:`ReplayLearner.add`, :meth:`ReplayLearner.train` samples batches, computes
and applies gradients (refreshing priorities under prioritised replay), and
:meth:`ReplayLearner.weights` publishes the policy to collectors. A placement that puts
gradient workers and the updater on different ranks calls the algorithm's
``compute_gradients`` / ``apply_gradients`` itself, exactly as :meth:`train` does here.
"""
from __future__ import annotations

from typing import Any

from hpcrl.algorithms.off_policy import OffPolicyAlgorithm
from hpcrl.buffers.replay.buffer import ReplayBuffer
from hpcrl.buffers.replay.goals import GoalRewards
from hpcrl.buffers.replay.her import HerReplayBuffer
from hpcrl.buffers.replay.prioritized import PrioritizedReplayBuffer
from hpcrl.buffers.replay.transitions import Transitions
from hpcrl.envs.obs_format import ObsFormat
from hpcrl.exchange.messages import Weights
from hpcrl.numerics.gradient_guard import was_applied
from hpcrl.runtime.cpu import flush_denormals
from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.schema import EnvConfig


def make_replay(r: ReplayConfig, seed: int, gamma: float, env: EnvConfig,
                obs_shape: tuple[int, ...], action_shape: tuple[int, ...], discrete: bool,
                obs_dtype: str = "float32", obs_format: ObsFormat | None = None,
                streams: int = 1) -> ReplayBuffer:
    """The uniform, prioritised or hindsight replay of the section ``r`` (``replay``),
    sampling from ``seed``; observations are stored in ``obs_dtype``, the carried dtype of
    the env's observation format.

    A hindsight replay (``replay.her_strategy``) also needs the env's ``obs_format`` (where
    the goals sit) and ``streams``, the envs of the job whose episodes it keeps apart; it
    holds one env of the section ``env`` for its ``compute_reward`` and discounts its
    relabelled n-step rewards by ``gamma`` (``algo.gamma``)."""
    if r.her_strategy != "none":
        if obs_format is None:
            raise ValueError("a hindsight replay needs the env's observation format")
        return HerReplayBuffer(r.buffer_size, obs_format, action_shape, seed, streams,
                               r.her_strategy, r.her_k, gamma, GoalRewards(env))
    if r.prioritized:
        return PrioritizedReplayBuffer(r.buffer_size, obs_shape, action_shape, discrete,
                                       seed, r.alpha, r.priority_eps, obs_dtype)
    return ReplayBuffer(r.buffer_size, obs_shape, action_shape, discrete, seed, obs_dtype)


class ReplayLearner:
    """Replay storage plus the algorithm's gradient steps; every step makes a new version.
    ``keys`` is the ``replay`` section (batch size, learning start, priorities);
    ``total_env_steps`` (``train.total_env_steps``) sets the progress of the schedules."""

    def __init__(self, algorithm: OffPolicyAlgorithm, replay: ReplayBuffer,
                 keys: ReplayConfig, total_env_steps: int) -> None:
        self.algorithm, self.replay = algorithm, replay
        self.keys = keys
        self.total_env_steps = total_env_steps
        self.message = Weights.empty_like(algorithm.policy)
        # gradient steps taken, applied or dropped by the gradient guard: what the replay
        # ratio counts (the version counts the applied ones)
        self.steps_taken = 0
        # the loss terms, and the gradient steps taken per env step collected
        self.stat_names = type(algorithm).reported_stats(False)

    @property
    def version(self) -> int:
        """Applied gradient steps so far (the version of the published policy)."""
        return self.algorithm.steps

    def add(self, chunk: Transitions) -> None:
        """Store the valid rows of a collector's chunk (the algorithm sees them first)."""
        self.algorithm.observe(chunk)
        self.replay.add(chunk)

    def ready(self, job_env_steps: int) -> bool:
        """Whether training may start: past ``replay.learning_starts`` with data to sample."""
        return job_env_steps > self.keys.learning_starts and len(self.replay) > 0

    def train(self, gradient_steps: int, job_env_steps: int) -> dict[str, float]:
        """``gradient_steps`` steps on fresh batches; returns the mean of each loss term, the
        mean ``grad_norm`` (before clipping) of the applied steps and the other optimiser
        figures of the last one (a step the algorithm's guard drops for a non-finite gradient
        leaves the weights and the batch's priorities alone)."""
        alg = self.algorithm
        self.steps_taken += gradient_steps
        alg.set_progress(job_env_steps / self.total_env_steps)
        beta = self.keys.beta0 + (1.0 - self.keys.beta0) * alg.progress
        prioritized = self.keys.prioritized
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        applied: dict[str, float] = {}
        norm_sum, steps_applied = 0.0, 0
        with flush_denormals():
            for _ in range(gradient_steps):
                batch = self.replay.sample(self.keys.batch_size, beta).to(alg.device)
                grads, stats = alg.compute_gradients(batch)
                figures = alg.apply_gradients(grads)
                if not was_applied(figures):
                    continue
                applied = figures
                norm_sum += figures["grad_norm"]
                steps_applied += 1
                if prioritized:
                    self.replay.update_priorities(batch.indices, alg.priorities())
                for name, value in stats.items():
                    sums[name] = sums.get(name, 0.0) + value
                    counts[name] = counts.get(name, 0) + 1
        means = {name: sums[name] / counts[name] for name in sums}
        means.update(applied)
        if steps_applied:
            means["grad_norm"] = norm_sum / steps_applied
        return means

    def weights(self) -> Weights:
        """The current policy as a message (valid until the next call)."""
        return self.message.capture(self.algorithm.policy, self.version)

    def state_dict(self) -> dict[str, Any]:
        """The algorithm's state, the replay's and the gradient steps taken, for a checkpoint."""
        return {"algorithm": self.algorithm.state_dict(), "replay": self.replay.state_dict(),
                "steps_taken": self.steps_taken}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.algorithm.load_state_dict(state["algorithm"])
        self.replay.load_state_dict(state["replay"])
        # a checkpoint of an older version counted applied steps only
        self.steps_taken = int(state.get("steps_taken", self.algorithm.steps))
