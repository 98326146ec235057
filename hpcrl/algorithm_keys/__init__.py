"""The built-in algorithms' own config sections (``algo.ppo``, ``algo.dqn``, ...): one
dataclass each, in a module of its own that imports no torch.

Each algorithm class names its section and its keys (``PPO.section = "ppo"``,
``PPO.section_keys = PpoConfig``), as a plug-in does; the dataclasses live here, apart from
the classes, because the config's schema holds the built-ins' sections (their keys are
documented and checked like every other key) and importing the config's data loads no
torch. A field default is the algorithm's standard value."""
