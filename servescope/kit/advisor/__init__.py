"""Advice: batch size from live latency and utilisation, KV-cache sizing from a model config."""
