"""Engine-parameter search: grid, random and Bayesian trials, each restarting the engine."""
