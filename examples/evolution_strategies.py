"""A learner family of your own: evolution strategies, with a data path of its own.

    PYTHONPATH=examples hpcrl train --set algo.name=evolution_strategies:EvolutionStrategies \\
        --set algo.num_steps=500 --set train.total_env_steps=400000
    PYTHONPATH=examples mpiexec -n 3 hpcrl train --set scheme.preset=a2c \\
        --set algo.name=evolution_strategies:EvolutionStrategies --set algo.num_steps=500

OpenAI's evolution strategies (Salimans et al. 2017) need no gradient of the policy: each
update, every env of the job plays one episode (at most ``algo.num_steps`` steps) with the
policy's weights moved along a random direction, ``theta +- sigma * eps_k`` (the job's envs
``2k`` and ``2k + 1`` take the two signs of pair ``k``: antithetic sampling), and the
learner moves ``theta`` along ``sum_k (F(+k) - F(-k)) eps_k / (2 n sigma)``, the returns
``F`` ranked into [-0.5, 0.5] first (fitness shaping), with the run's optimiser and
``algo.lr``. Every direction comes from a seed known to all (the run's seed, the weights
version and the pair), so a collector sends its learner one number per env: the return,
not a rollout.

Such a learner is a family of its own (:class:`hpcrl.algorithms.family.Family`): its data
path, what its collectors fill (``"evaluations"``), the layout they stream, and how they
act are this module's, declared by the class in ``family``; hpcrl's ranks, streams, weights
messages, checkpoints and leader are the same as every family's. This one module is all it
takes: no file of hpcrl names it. Its keys are ``algo.es.*``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import hpcrl
from hpcrl.algorithms.family import Family
from hpcrl.algorithms.own_section import own_section
from hpcrl.errors import ConfigError
from hpcrl.exchange.protocol import CHECKPOINT, STOP, Control, Report, ReportLayout
from hpcrl.numerics.flat import contiguous_parameters
from hpcrl.numerics.records import RecordLayout, attach_views, buffer_words, scalar_fields
from hpcrl.placement.ranks.job_control import JobControl, write_checkpoint
from hpcrl.placement.wiring.rollout_source import SyncCollectors


@dataclass
class EsConfig:
    """Evolution strategies' own keys (``algo.es.*``)."""

    sigma: float = 0.05
    """The standard deviation of the perturbations of the weights."""
    fitness_shaping: bool = True
    """Rank the returns into [-0.5, 0.5] before weighting the directions (robust to the
    returns' scale); false: the raw returns, centred."""


# -- what a collector streams: one return per env ---------------------------------------------
FACTS = ("weights_version", "env_offset", "source", "seconds", "env_restarts", "env_failed")
HEADER = RecordLayout(scalar_fields(FACTS))


@dataclass(frozen=True)
class EvaluationsLayout:
    """One collector's evaluations: each env's return and episode length."""

    num_envs: int

    def fields(self) -> Any:
        """The fields of the data buffer."""
        yield "returns", (self.num_envs,)
        yield "lengths", (self.num_envs,)

    @property
    def data_size(self) -> int:
        """float32 words of the data buffer."""
        return buffer_words(self.fields())

    def new(self, data: np.ndarray | None = None) -> Evaluations:
        """A buffer of zeros (its data in ``data`` when given: a shared region's slot)."""
        return Evaluations(self, np.zeros(self.data_size, np.float32) if data is None
                           else data, np.zeros(HEADER.words // 2, np.float64))


class Evaluations:
    """The returns of one collector's envs under their perturbed weights (the family's
    unit), with the header every streamed unit has."""

    returns: np.ndarray
    lengths: np.ndarray

    def __init__(self, layout: EvaluationsLayout, data: np.ndarray, header: np.ndarray
                 ) -> None:
        self.layout, self.data, self.header = layout, data, header
        attach_views(self, layout.fields(), data)
        self.facts = HEADER.wrap(header.view(np.float32))

    @property
    def weights_version(self) -> int:
        """The version of the weights that were perturbed."""
        return int(self.facts.weights_version)

    @property
    def env_offset(self) -> int:
        """The global index of the collector's first env."""
        return int(self.facts.env_offset)

    @property
    def collect_seconds(self) -> float:
        """Seconds the evaluation took."""
        return float(self.facts.seconds)


def direction(seed: int, version: int, pair: int, numel: int) -> torch.Tensor:
    """The direction ``eps`` of pair ``pair`` at weights version ``version``: the same on
    every rank that asks."""
    generator = torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, version, pair]).generate_state(1)[0]))
    return torch.randn(numel, generator=generator)


def perturbed(base: torch.Tensor, seed: int, version: int, env: int,
              sigma: float) -> torch.Tensor:
    """The weights global env ``env`` plays with: ``base +- sigma * eps`` of its pair."""
    sign = 1.0 if env % 2 == 0 else -1.0
    return base + sign * sigma * direction(seed, version, env // 2, base.numel())


class EsCollector:
    """Plays one episode per env, each with its own perturbation of the weights (what a
    collector rank, or the learner of one process, drives)."""

    def __init__(self, job: Any, envs: Any, actor: Any) -> None:
        self.envs, self.actor = envs, actor
        self.seed, self.offset = job.config.seed, job.role.env_offset
        self.sigma = own_section(job.config.algo).sigma
        self.max_steps = job.steps_per_collection
        self.weights_version = 0
        self.episodes = 0

    def load_weights(self, weights: Any) -> None:
        """Play with this version from now on."""
        weights.load_into(self.actor)
        self.follow(weights.version)

    def follow(self, version: int) -> None:
        """The actor's current weights are version ``version``."""
        self.weights_version = version

    @torch.no_grad()
    def collect(self, buffer: Evaluations, should_stop: Any = None) -> Evaluations:
        """Each env's return of one episode (at most ``algo.num_steps`` steps) played with
        its perturbed weights (the actor's own are put back after)."""
        started = time.perf_counter()
        flat = contiguous_parameters(self.actor)
        base = flat.clone()
        n = self.envs.num_envs
        weights = [perturbed(base, self.seed, self.weights_version, self.offset + i,
                             self.sigma) for i in range(n)]
        obs = np.concatenate(self.envs.reset(seed=[int(s) for s in np.random.SeedSequence(
            [self.seed, self.weights_version, self.offset]).generate_state(n)]))
        returns, lengths = np.zeros(n), np.zeros(n)
        playing = np.ones(n, bool)
        group = self.envs.groups[0]
        try:
            for _ in range(self.max_steps):
                actions = []
                for i in range(n):
                    flat.copy_(weights[i])
                    actions.append(np.asarray(self.actor(obs[i])))
                self.envs.begin(group.index, np.stack(actions))
                obs, rewards, terminated, truncated, _ = self.envs.end(group.index)
                returns += np.where(playing, rewards, 0.0)
                lengths += playing
                playing &= ~(terminated | truncated)
                if not playing.any():
                    break
        finally:
            flat.copy_(base)
        self.episodes += n
        buffer.returns[:], buffer.lengths[:] = returns, lengths
        buffer.facts.set(weights_version=self.weights_version, env_offset=self.offset,
                         source=self.offset, seconds=time.perf_counter() - started,
                         env_restarts=0.0, env_failed=0.0)
        return buffer

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: where its envs are (each update resets them)."""
        return {"env_offset": self.offset, "episodes": self.episodes}

    def load_state_dict(self, state: dict[str, Any]) -> list[str]:
        """Restore :meth:`state_dict`'s count; nothing else carries over."""
        self.episodes = int(state["episodes"])
        return []


class EsUpdates:
    """The family's data path: evaluations in, one step of the weights per update."""

    def __init__(self, job: Any, resume: dict[str, Any] | None, leader: Any,
                 algorithm: Any, reducer: Any) -> None:
        if len(job.workers) > 1 or job.scheme.collection != "sync":
            raise ConfigError("evolution strategies learn on one learner rank from "
                              "synchronous collectors (scheme.gradient_workers=1, "
                              "scheme.collection=sync: a2c's preset, or one process)")
        if job.total_envs % 2:
            raise ConfigError(f"evolution strategies pair their envs (antithetic "
                              f"directions): the job's {job.total_envs} envs must be even")
        self.job, self.leader, self.algorithm = job, leader, algorithm
        self.actor = algorithm.actor
        self.version = 0
        if resume is not None:
            self.actor.load_state_dict(resume["policy"]["state_dict"])
            self.algorithm.load_state_dict(resume["placement"]["updater"]["algorithm"])
            self.version = int(resume["placement"]["updater"]["version"])
        self.own: EsCollector | None = None
        self.source: SyncCollectors | None = None
        if job.role.collects:  # one process: its own envs, played with a copy of the actor
            self.envs = job.collector_envs()
            self.own = EsCollector(job, self.envs, job.new_actor())
            self.unit = EVALUATION_WIRING.stream_layout(job).new()
        else:
            self.source = SyncCollectors(job)
        self.layout = ReportLayout(algorithm.stat_names)
        self.sigma, self.shaping = algorithm.own.sigma, algorithm.own.fitness_shaping

    def control(self) -> Any:
        """Rank 0's leader decides for the learner."""
        return JobControl(self.job.learners, self.leader)

    def start(self) -> None:
        """The collectors start with the learner's weights."""
        self.publish(0)

    def publish(self, command: int) -> None:
        """Hand out the weights at their version, carrying ``command``."""
        if self.own is not None:
            contiguous_parameters(self.own.actor).copy_(contiguous_parameters(self.actor))
            self.own.follow(self.version)
        elif command & STOP:
            self.source.close(self.actor, self.version, command)
        else:
            self.source.publish(self.actor, self.version, command)

    def _evaluations(self) -> tuple[list[Evaluations], float]:
        if self.own is not None:
            return [self.own.collect(self.unit)], self.unit.collect_seconds
        units, seconds, _ = self.source.gather(0, self.version)
        return units, seconds

    def learn_update(self) -> Report:
        """Gather every env's return, step the weights along the shaped directions."""
        units, seconds = self._evaluations()
        report = self.layout.new()
        if not units:  # an env failed for good: nothing to learn from (the job stops)
            self.layout.fill(report, env_failures=float(self.source.env_failures))
            return report
        returns = np.concatenate([u.returns for u in units])
        lengths = np.concatenate([u.lengths for u in units])
        envs = np.concatenate([u.env_offset + np.arange(len(u.returns)) for u in units])
        fitness = returns[np.argsort(envs)]
        if self.shaping:
            fitness = np.argsort(np.argsort(fitness)) / max(len(fitness) - 1, 1) - 0.5
        else:
            fitness = fitness - fitness.mean()
        flat = contiguous_parameters(self.actor)
        step = torch.zeros_like(flat)
        pairs = len(fitness) // 2
        for k in range(pairs):
            eps = direction(self.job.config.seed, self.version, k, flat.numel())
            step += float(fitness[2 * k] - fitness[2 * k + 1]) * eps
        ascent = step / (2 * pairs * self.sigma)
        stats = self.algorithm.apply_gradients(-ascent)  # the optimiser descends
        self.version += 1
        self.layout.fill(report, env_steps=float(lengths.sum()), episodes=float(len(returns)),
                         return_sum=float(returns.sum()), length_sum=float(lengths.sum()),
                         time_collect_s=seconds, gradients=1.0, applied=1.0,
                         grad_norm_sum=stats["grad_norm"],
                         learning_rate=self.algorithm.learning_rate,
                         live_collectors=float(len(units)))
        return report

    def end_update(self, control: Control) -> None:
        """Publish the new weights with the decision; checkpoint when it asks."""
        command = int(control.command)
        self.publish(command)
        if command & CHECKPOINT and self.leader is not None:
            state = {"version": self.version, "algorithm": self.algorithm.state_dict()}
            own = [] if self.own is None else [[self.own.state_dict()]]
            write_checkpoint(self.job, self.leader, self.actor, state, own, self.version)

    def release(self) -> None:
        """After an error in one process: close its envs."""
        if self.own is not None:
            self.envs.close()

    def finish(self) -> None:
        """Close its own envs (collector ranks close theirs)."""
        self.release()


class EvaluationWiring:
    """The family's wiring (:class:`~hpcrl.algorithms.family.FamilyWiring`)."""

    def data_path(self, job: Any, resume: dict[str, Any] | None, leader: Any,
                  algorithm: Any, reducer: Any) -> EsUpdates:
        """Evaluations in, one step of the weights per update."""
        return EsUpdates(job, resume, leader, algorithm, reducer)

    def stream_layout(self, job: Any) -> EvaluationsLayout:
        """One return and length per env of a collector."""
        return EvaluationsLayout(job.num_envs)

    def collector(self, job: Any, envs: Any, link: Any, incarnation: int
                  ) -> tuple[EsCollector, Any]:
        """A collector that plays each env with its perturbed weights."""
        if link is not None:
            raise ConfigError("evolution strategies play each env with weights of its own: "
                              "drop scheme.inference_ranks")
        actor = job.new_actor()
        return EsCollector(job, envs, actor), actor

    def acting_spec(self, job: Any, module: Any) -> Any:
        """None: no inference rank acts for it (refused above)."""
        raise ConfigError("evolution strategies play each env with weights of its own: "
                          "drop scheme.inference_ranks")


EVALUATION_WIRING = EvaluationWiring()


def _summary(sections: Any, cls: type) -> str:
    """The plan's line: the algorithm, its perturbations per collector and their scale."""
    algo = sections.algo
    return (f"{algo.name}, {sections.env.num_envs} perturbed policies a collector, "
            f"sigma {own_section(algo).sigma}")


ES = Family("evolution strategies", "evaluations", _summary,
            f"{__name__}:EVALUATION_WIRING")


class EvolutionStrategies(hpcrl.A2C):
    """OpenAI-ES over the actor-critic's policy (see the module); A2C's keys and optimiser,
    a family of its own."""

    family = ES
    section = "es"
    section_keys = EsConfig

    @classmethod
    def section_problem(cls, own: EsConfig) -> str | None:
        """The perturbations' scale must be positive."""
        if not own.sigma > 0:
            return f"config key 'algo.es.sigma' must be > 0, got {own.sigma}"
        return None
