"""Multi-agent envs (PettingZoo's Parallel and AEC APIs, OpenSpiel games through shimmy) as a
fixed set of *seats* that a collector can step in lock step.

- :mod:`~hpcrl.envs.multiagent.named_envs`: a PettingZoo env from a name, with errors that name the
  fix;
- :mod:`~hpcrl.envs.multiagent.seats`: the one interface both APIs are adapted to (who acts,
  what it sees, its legal moves, the reward its last action earned);
- :mod:`~hpcrl.envs.multiagent.aec` and :mod:`~hpcrl.envs.multiagent.parallel`: the adapters;
- :mod:`~hpcrl.envs.multiagent.seat_vector`: N envs stepped together, per-seat arrays ``[N, ...]``;
- :mod:`~hpcrl.envs.multiagent.matches`: per-seat returns and win/draw/loss of finished
  matches;
- :mod:`~hpcrl.envs.multiagent.seeding`: the seed of each match, by global env index;
- :mod:`~hpcrl.envs.multiagent.play_modes`: who plays the agents (``env.agents``: one shared
  policy, or self-play against a league), and what follows from it;
- :mod:`~hpcrl.envs.multiagent.joint_agents` and :mod:`~hpcrl.envs.multiagent.agent_slots`:
  a Parallel game whose agents all act with one shared policy (``env.agents=shared``), each
  agent of each game one env slot of a collector.
"""
