"""One member of a population, as its training loop sees it: :class:`Member`.

Every ``pbt.interval_env_steps`` the loop calls :meth:`Member.step` with its env steps, its
score, the hyperparameters in effect and the path of the checkpoint it has just written. The
member publishes that snapshot, ranks itself among its peers
(:func:`hpcrl.population.exploit.leaders`), and either stays or copies a leader's checkpoint
into its own place and mutates the leader's hyperparameters
(:func:`hpcrl.population.explore.mutate`), recording the copy in the lineage. The loop then
loads the copy (weights, optimiser state, normalisation statistics) and goes on in place with
the new values.

Each decision draws from an RNG seeded by the population's seed, the member and its env steps,
not from a stream carried through the run: a requeued member that repeats an interval makes
the decision it would have made, and one seed gives one population.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpcrl.errors import ConfigError
from hpcrl.population.exploit import leaders
from hpcrl.population.explore import check_keys, mutate
from hpcrl.population.lineage import Lineage
from hpcrl.population.settings import check_settings
from hpcrl.population.workspace import Snapshot, Workspace
from hpcrl.sections.pbt_section import PbtConfig

__all__ = ["Decision", "Member"]


@dataclass(frozen=True)
class Decision:
    """What a member does after an interval: stay, or load ``checkpoint`` (a copy of member
    ``copy_from``'s) and go on with ``hyperparameters``."""

    hyperparameters: dict[str, float] = field(default_factory=dict)
    copy_from: int | None = None
    checkpoint: Path | None = None

    @property
    def stay(self) -> bool:
        """Whether the member goes on as it was (its own weights and values)."""
        return self.copy_from is None


class Member:
    """Member ``member`` of the population in ``population_dir`` (``RUN_DIR/population``)."""

    def __init__(self, settings: PbtConfig, population_dir: str | Path, member: int,
                 seed: int = 0, clock: Callable[[], float] = time.time) -> None:
        self.settings = check_settings(settings)
        if not isinstance(member, int) or not 0 <= member < settings.members:
            raise ConfigError(f"PBT member {member!r} is not one of the population's "
                              f"{settings.members} (0 to {settings.members - 1}): pass a "
                              "member id in that range, or raise pbt.members")
        self.member, self.seed, self.clock = member, seed, clock
        self.workspace = Workspace(population_dir)
        self.lineage = Lineage(population_dir)
        self.workspace.discard_leftovers(member)
        own = self.workspace.read(member)  # a requeued member goes on from its last interval
        self.last_env_steps: int | None = own.env_steps if own else None

    def due(self, env_steps: int) -> bool:
        """Whether an interval has passed since this member's last step (or since 0)."""
        return env_steps - (self.last_env_steps or 0) >= self.settings.interval_env_steps

    def score(self, stats: Mapping[str, float]) -> float:
        """The objective (``pbt.objective``) among a run's ``stats``."""
        if self.settings.objective not in stats:
            raise ConfigError(f"pbt.objective is {self.settings.objective!r}, which the run "
                              f"does not report: use one of {', '.join(sorted(stats))}")
        return float(stats[self.settings.objective])

    def rng(self, env_steps: int) -> random.Random:
        """The RNG of this member's decision at ``env_steps`` (seeded, see the module)."""
        return random.Random(f"hpcrl-pbt/{self.seed}/{self.member}/{env_steps}")

    def publish(self, env_steps: int, score: float, hyperparameters: Mapping[str, float],
                checkpoint: str | Path) -> Snapshot:
        """Publish this member's scored snapshot (its peers rank it and may copy it) without
        deciding anything: what the budget's last checkpoint does."""
        check_keys(hyperparameters, self.settings)
        me = Snapshot(self.member, env_steps, float(score), dict(hyperparameters),
                      str(checkpoint), self.clock())
        self.workspace.publish(me)
        self.last_env_steps = env_steps
        return me

    def step(self, env_steps: int, score: float, hyperparameters: Mapping[str, float],
             checkpoint: str | Path) -> Decision:
        """Publish this interval's snapshot and decide: stay, or copy a leader and mutate."""
        me = self.publish(env_steps, score, hyperparameters, checkpoint)
        if not self.settings.exploit:  # (random search: published, never copied)
            return Decision(dict(hyperparameters))
        rng = self.rng(env_steps)
        for leader in leaders(me, self.workspace.peers(self.member), self.settings, rng):
            copy = self.workspace.adopt(leader, self.member)
            if copy is not None:  # else the leader's checkpoint is gone: try the next
                return self._copied(me, leader, copy, rng)
        return Decision(dict(hyperparameters))

    def _copied(self, me: Snapshot, leader: Snapshot, copy: Path,
                rng: random.Random) -> Decision:
        """The decision to go on from ``copy`` of ``leader``, with its values mutated; the
        copy recorded in the lineage."""
        keys = self.settings.mutate
        base = dict(me.hyperparameters)
        base.update({k: v for k, v in leader.hyperparameters.items() if k in keys})
        new = mutate(base, self.settings, rng)
        self.lineage.record(self.member, leader.member, me.env_steps,
                            (me.score, leader.score), {k: me.hyperparameters[k] for k in keys},
                            {k: new[k] for k in keys}, when=self.clock())
        self.lineage.write_merged()
        return Decision(new, leader.member, copy)
