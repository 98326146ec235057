"""Numerics every layer shares, with no RL in them: flat parameter vectors and named-field
records, optimisers over them, precision, compiling, the gradient guard, moments,
normalisation and cross-process sums."""
