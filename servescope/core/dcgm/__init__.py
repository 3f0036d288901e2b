"""DCGM's vocabulary: field ids and names, the counters file, dmon's format."""
