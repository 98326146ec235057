"""A league of frozen policies for self-play: snapshots kept on disk by weights version, the
sampling of an opponent per match (latest, uniform, prioritised fictitious self-play), the
log of every finished match and the ratings read from it.

- :mod:`~hpcrl.league.snapshots`: immutable snapshot files of a trained policy;
- :mod:`~hpcrl.league.opponents`: who plays the next match (PFSP's weightings);
- :mod:`~hpcrl.league.match_log`: each env's matches, cut back exactly on a resume;
- :mod:`~hpcrl.league.ratings`: Elo and openskill ratings over the logged matches;
- :mod:`~hpcrl.league.standings`: the league table ``hpcrl league RUN`` prints.
"""
