"""Shared test helpers: a controllable clock, a simulated NVML stack, the fixtures folder, the gate of the
tests against CI's real vLLM (processes and waiting: tests/support)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path

import pytest

from servescope.exporter.exposition import Sample

# The one fake clock and NVML stack, shared with the benchmarks (servescope-sim); tests import them here.
from servescope_sim.clock import FakeClock
from servescope_sim.node_harness import nvml_stack

__all__ = ["FakeClock", "nvml_stack"]

# Everything a test reads lives in the checkout: captured real outputs (expositions, dmon output, a
# process tree) in fixtures/samples, facts of upstream specs beside them; fixtures/README.md says where
# each came from. A plain clone passes with nothing beside it.
FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = FIXTURES / "samples"
# Only the real-vLLM tests need more: the setup script that builds a CPU vLLM, in the shared/ folder CI
# lays out beside the checkout (SERVESCOPE_SHARED points elsewhere). Without it they skip, saying so.
SHARED = Path(os.environ.get("SERVESCOPE_SHARED", Path(__file__).parents[1].parent / "shared"))
# Tests that start real vLLM servers of their own (DP=2, restarts) take minutes each on 2 cores, so they
# run only when asked: `.ci/run` asks, after `make test`, once the shared server is stopped.
OWN_VLLM_SERVERS = os.environ.get("SERVESCOPE_TEST_VLLM_OWN_SERVERS") == "1"
OWN_VLLM_SKIP_REASON = "starts its own real vLLM (minutes): needs SERVESCOPE_TEST_VLLM_OWN_SERVERS=1"
# The real vLLM CI starts once for the whole run (`.ci/run`); tests against it skip, saying so, without it.
VLLM_URL = os.environ.get("SERVESCOPE_TEST_VLLM_URL", "").rstrip("/")
VLLM_MODEL = os.environ.get("SERVESCOPE_TEST_VLLM_MODEL", "tiny-llm")
NEEDS_SHARED_VLLM = [
    pytest.mark.real_vllm,
    pytest.mark.skipif(
        not VLLM_URL,
        reason="no real vLLM: set SERVESCOPE_TEST_VLLM_URL (CI starts one with "
        "../shared/tools/real-vllm/setup.sh)",
    ),
]


def values(samples: Iterable[Sample], name: str, **labels: str) -> list[float]:
    """Values of the samples of family `name` whose labels include `labels`."""
    found = []
    for s in samples:
        if s.spec.name != name:
            continue
        got = dict(zip(s.spec.labels, s.label_values, strict=True))
        if all(got.get(k) == v for k, v in labels.items()):
            found.append(s.value)
    return found


def families_for_gpu(samples: Iterable[Sample], gpu: str) -> set[str]:
    return {s.spec.name for s in samples if "gpu" in s.spec.labels and s.label_values[0] == gpu}


def read_request(conn: socket.socket) -> bool:
    """Read one HTTP request head from `conn`; False when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return False
        data += chunk
    return True
