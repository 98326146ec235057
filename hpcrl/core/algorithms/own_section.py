"""The section of the algorithm a run trains, looked up by its kind.

``algo.<kind>`` holds the keys of the built-in a run trains as (``algo.td3`` for TD3 or a
plug-in subclass of it). The lookup needs the algorithm's class (a plug-in's kind is its
nearest built-in base), so it lives here, beside the registry, and not on the config's
data: the config is data that core reads in annotations only."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcrl.core.algorithms import algorithm_kind

if TYPE_CHECKING:  # annotations only: core does not import config at run time
    from hpcrl.config.schema import AlgoConfig


def own_section(algo: AlgoConfig) -> Any:
    """The section of the algorithm ``algo.name`` trains (``algo.<kind>``); None for one
    with no keys of its own (A2C). Code that serves several algorithms (the collectors'
    exploration) reads its keys here, so it needs no branch on the algorithm's name."""
    return getattr(algo, algorithm_kind(algo.name), None)
