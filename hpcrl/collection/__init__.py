"""Collection: the collector (one collection loop, a filler per family), its env-state core,
its exploration and normalisation. The learners that read what it collects live in
:mod:`hpcrl.learning`, the exchanges that carry it in :mod:`hpcrl.exchange`; placements
decide where each runs."""
from hpcrl.collection.collector import Collector

__all__ = ["Collector"]
