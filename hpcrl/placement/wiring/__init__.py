"""What each built-in algorithm family runs on ranks, its
:class:`~hpcrl.algorithms.family.FamilyWiring`: the learner's data path, the collectors'
collector, the stream layout and the acting spec. A job finds its family's wiring through
the algorithm's declaration (:attr:`~hpcrl.algorithms.family.Family.wiring`), never by a
table."""
