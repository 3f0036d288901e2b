"""Grafana dashboards as code (grafanalib): one module per dashboard in `boards/`, built to JSON."""

from pathlib import Path

# The committed, generated JSON and ConfigMaps (a test fails when they are stale).
BUILD_DIR = Path(__file__).resolve().parent / "build"
