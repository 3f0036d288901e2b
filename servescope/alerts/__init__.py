"""Alert rules as code: one config object in, Prometheus rules, the PrometheusRule CRD and Alertmanager
configuration out."""

from pathlib import Path

# The committed, generated bundle (a test fails when it is stale); `servescope alerts build` writes here.
BUILD_DIR = Path(__file__).resolve().parent / "build"
