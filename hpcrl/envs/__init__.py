"""Envs: making them (suites, preprocessing chains, the user's wrappers), stepping them
as vector envs (backends), and keeping them alive and checkpointable. Pure Gymnasium;
they never know which process they run in."""
