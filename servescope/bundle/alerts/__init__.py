"""Alert rules as code: one config in; Prometheus rules, the CRD and Alertmanager config out."""

from pathlib import Path

# The committed, generated bundle (a test fails when it is stale); `servescope alerts build` writes here.
BUILD_DIR = Path(__file__).resolve().parent / "build"
