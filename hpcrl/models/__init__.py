"""Models: encoders, memory cores, heads, distributions, critics, Q-networks and the
policies and engines that act with them. Pure PyTorch (and numpy kernels)."""
