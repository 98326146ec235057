"""Training roles that collect: the collector (one collection loop, a filler per family),
its env-state core, and the messages and records every role exchanges. The learners that
read what they collect live in :mod:`hpcrl.learning`; placements decide where each runs."""
from hpcrl.roles.collector import Collector
from hpcrl.roles.messages import Gradient, Weights

__all__ = ["Collector", "Gradient", "Weights"]
