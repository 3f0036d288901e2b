"""The alert-quality benchmark: scenarios with ground truth, simulated series, real rules, real Prometheus."""
