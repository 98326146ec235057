"""Env suites: families of envs whose package registers their ids with Gymnasium.

Each suite is one module here holding its :class:`~hpcrl.envs.suites.suite.Suite`
record (how its ids are recognised and registered, its extra, what hpcrl does to its envs),
which the module registers in :data:`~hpcrl.envs.suites.suite.SUITES`; the registry
imports every module of this package before it is first read, so adding a suite is one
module and nothing else (:mod:`hpcrl.envs.registry`). This package's own module imports
nothing, so a suite module may import the chain it adapts (``hpcrl.envs.vizdoom_preset``) while
that chain reads the record's helpers.
"""
