"""`servescope vllm parse` on captured expositions."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import SAMPLES
from tests.support import SERVESCOPE

pytestmark = pytest.mark.e2e


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SERVESCOPE, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.e2e
def test_parse_prints_the_normalised_signals() -> None:
    result = run("vllm", "parse", str(SAMPLES / "vllm-0.32-cpu-idle.txt"))
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["backend"] == "vllm" and body["generation"] == "0.11+"
    (engine,) = body["engines"]
    assert engine["model_name"] == "tiny-llm" and engine["engine"] == "0"
    assert engine["signals"]["prompt_tokens"] == 712 and engine["signals"]["ttft"]["count"] == 30


@pytest.mark.e2e
def test_parse_sglang() -> None:
    body = json.loads(run("vllm", "parse", str(SAMPLES / "sglang-0.4-docs.txt")).stdout)
    assert body["backend"] == "sglang" and body["engines"][0]["signals"]["waiting"] == 2826


@pytest.mark.e2e
def test_parse_refuses_what_is_not_an_engine() -> None:
    result = run("vllm", "parse", str(SAMPLES / "dcgmi-dmon-4.2-profiling.txt"))
    assert result.returncode == 2
    assert "servescope: error:" in result.stderr
    refused = run("vllm", "parse", "http://127.0.0.1:9/metrics")
    assert refused.returncode == 2 and "connect" in refused.stderr
