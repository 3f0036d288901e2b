"""The load, capacity, tuning and canary-analysis kit."""
