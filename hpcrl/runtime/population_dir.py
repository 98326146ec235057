"""The layout of a population's directory (``hpcrl pbt``), which every placement of its
members, the plots and the run tables read alike.

    POP/
      pbt-config.yaml             the population's config, as its first start resolved it
      member-00/ ... member-NN/   each member's run directory (an ordinary run)
      population/                 the members' exchange (hpcrl.population.workspace)
        lineage.csv               every copy: who copied whom, when, which values
      logs/                       the members' console (local) or Slurm logs
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONFIG_FILE", "PopulationDir"]

CONFIG_FILE = "pbt-config.yaml"


@dataclass(frozen=True)
class PopulationDir:
    """The directory ``path`` of a population."""

    path: Path

    @property
    def config_path(self) -> Path:
        """``pbt-config.yaml``: the config every member trains."""
        return self.path / CONFIG_FILE

    def member(self, member: int) -> Path:
        """Member ``member``'s run directory."""
        return self.path / f"member-{member:02d}"

    @property
    def exchange(self) -> Path:
        """``population/``: where members publish, read and copy each other's snapshots."""
        return self.path / "population"

    @property
    def lineage_path(self) -> Path:
        """``population/lineage.csv``: the merged record of every copy."""
        return self.exchange / "lineage.csv"

    @property
    def logs(self) -> Path:
        """``logs/``: the members' console or Slurm logs."""
        return self.path / "logs"

    def is_population(self) -> bool:
        """Whether ``path`` holds a population (its config file)."""
        return self.config_path.is_file()
