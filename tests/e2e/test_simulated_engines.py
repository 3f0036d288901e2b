"""`serve --simulate --engines 2`: engines found by discovery, joined to their GPUs through real /proc."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support import Served, servescope_serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def with_engines() -> Iterator[Served]:
    # --passthrough: off by default, asked for here to check the engines' own series re-exported too.
    args = ("--simulate", "--gpus", "4", "--engines", "2", "--vllm-interval", "1", "--hostname", "sim-node")
    with servescope_serving(*args, "--passthrough") as served:
        yield served


def joined_exposition(base: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        text = httpx.get(f"{base}/metrics").text
        if text.count("\nservescope_engine_gpu_info{") == 4:
            return text
        assert time.monotonic() < deadline, "engines were not discovered and joined in time"
        time.sleep(0.5)


@pytest.mark.e2e
def test_engines_are_discovered_and_joined_to_their_gpu_groups(with_engines: Served) -> None:
    text = joined_exposition(with_engines.base)
    joins = re.findall(
        r'servescope_engine_gpu_info\{model_name="([^"]+)",engine="0",endpoint="([^"]+)",'
        r'uuid="(GPU-[^"]+)",gpu="(\d)",pid="(\d+)"\} 1',
        text,
    )
    by_endpoint: dict[str, set[str]] = {}
    for _, endpoint, _, gpu, _ in joins:
        by_endpoint.setdefault(endpoint, set()).add(gpu)
    assert sorted(map(sorted, by_endpoint.values())) == [["0", "1"], ["2", "3"]]
    # The exporter is the engines' parent: it must not have discovered (and scraped) itself.
    own = with_engines.base + "/metrics"
    assert f'endpoint="{own}"' not in text
    # The PID in the join is the PID NVML lists on that GPU.
    for _, _, uuid, gpu, pid in joins:
        assert (
            f'servescope_gpu_process_memory_used_bytes{{gpu="{gpu}",uuid="{uuid}",hostname="sim-node",pid="{pid}"}}'
            in text
        )
    for endpoint in by_endpoint:
        assert f'servescope_source_up{{source="vllm",endpoint="{endpoint}"}} 1' in text
        assert (
            f'servescope_serving_engine_info{{endpoint="{endpoint}",backend="vllm",generation="0.11+"}} 1'
            in text
        )
        assert (
            f'vllm:num_requests_running{{engine="0",model_name="deepseek-ai/DeepSeek-V3",endpoint="{endpoint}"}}'
            in text
        )


@pytest.mark.e2e
def test_exposition_with_engines_passes_promtool(with_engines: Served, promtool: str) -> None:
    body = joined_exposition(with_engines.base)
    result = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60, check=False
    )
    # vLLM's own names carry ':' and one histogram ends in _total: promtool says so about the
    # passed-through series, exactly as it does for vLLM's own /metrics. Nothing else may appear.
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    unexpected = [
        line
        for line in problems
        if "should not contain ':'" not in line and "vllm:iteration_tokens_total" not in line
    ]
    assert unexpected == []
