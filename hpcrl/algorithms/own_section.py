"""The section of the algorithm a run trains, and the keys generic code reads through it.

``algo.<section>`` holds the keys of the algorithm a run trains, under the name its class
declares (:meth:`~hpcrl.algorithms.algorithm.Algorithm.section_name`: the built-in it
runs as, ``algo.td3`` for TD3 or a plug-in subclass of it, or a plug-in's own section).
The lookup needs the algorithm's class, so it lives here, beside the registry, and not on
the config's data (:mod:`hpcrl.sections`), which sits below core and looks nothing up."""
from __future__ import annotations

from typing import Any

from hpcrl.algorithms.registry import algorithm_type
from hpcrl.sections.schema import AlgoConfig


def own_section(algo: AlgoConfig) -> Any:
    """The section of the algorithm ``algo.name`` trains; None for one with no keys of its
    own (A2C). Code that serves several algorithms (the collectors' exploration) reads its
    keys here or through the class's declarations, so it needs no branch on the name."""
    return getattr(algo, algorithm_type(algo.name).section_name(), None)


def epsilon_keys(algo: AlgoConfig) -> Any | None:
    """The epsilon-greedy keys of ``algo.name`` (``exploration_*``, ``per_collector_eps``,
    ``collector_eps_*``) as its class reads them from its own section, or None for an
    algorithm that explores otherwise (the collectors and ``hpcrl plan`` ask here)."""
    return algorithm_type(algo.name).epsilon_keys(own_section(algo))
