"""Core components: envs, actors, storages, algorithms. Pure PyTorch and Gymnasium; they
never know which process they run in."""
