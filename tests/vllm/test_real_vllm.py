"""Against a REAL vLLM server (CPU build, tiny model): signals move under load, the join finds its tree.

CI starts the server with ../shared/tools/real-vllm/setup.sh and sets SERVESCOPE_TEST_VLLM_URL
(e.g. http://127.0.0.1:18000). Without it these tests are skipped, saying so.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from servescope.core import catalog as c
from servescope.core.catalog import derived as m
from servescope.exporter.derived.source import DerivedSource
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.vllm.join import gpus_of_endpoint
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import NEEDS_SHARED_VLLM, VLLM_MODEL, VLLM_URL, values

pytestmark = NEEDS_SHARED_VLLM


def complete(client: httpx.Client, max_tokens: int = 16) -> None:
    response = client.post(
        f"{VLLM_URL}/v1/completions",
        json={
            "model": VLLM_MODEL,
            "prompt": "The GPU fleet is",
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
        },
    )
    assert response.status_code == 200, response.text


def scrape(source: VllmSource) -> list[Sample]:
    return source.collect().samples


def one(samples: list[Sample], name: str) -> float:
    (value,) = values(samples, name, model_name=VLLM_MODEL)
    return value


def ttft_count(samples: list[Sample]) -> float:
    (value,) = [s.value for s in samples if s.spec is c.TTFT and s.suffix == "_count"]
    return value


@pytest.fixture
def source() -> Iterator[VllmSource]:
    made = VllmSource([f"{VLLM_URL}/metrics"], directory=GpuDirectory(), interval_seconds=1.0)
    yield made
    made.close()


def test_signals_are_read_and_move_with_requests(source: VllmSource) -> None:
    before = scrape(source)
    assert values(before, c.SERVING_ENGINE_INFO.name, backend="vllm") == [1]
    assert one(before, c.KV_CAPACITY.name) > 0
    with httpx.Client(timeout=120) as client:
        for _ in range(3):
            complete(client)
    after = scrape(source)
    assert one(after, c.PROMPT_TOKENS.name) > one(before, c.PROMPT_TOKENS.name)
    assert one(after, c.GENERATION_TOKENS.name) >= one(before, c.GENERATION_TOKENS.name) + 3 * 16
    assert ttft_count(after) == ttft_count(before) + 3
    (finished,) = values(after, c.REQUESTS_FINISHED.name, model_name=VLLM_MODEL, finished_reason="length")
    assert finished >= 3


def test_running_goes_up_under_concurrent_load(source: VllmSource) -> None:
    done = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=300) as client:
            while not done.is_set():
                complete(client, max_tokens=64)

    workers = [threading.Thread(target=load, daemon=True) for _ in range(6)]
    for worker in workers:
        worker.start()
    try:
        peak, deadline, missed = 0.0, time.monotonic() + 60, 0
        while peak < 2 and time.monotonic() < deadline:
            # A scrape of a CPU engine this busy may time out (the source says so and exports no
            # serving series): that is no reading, not a reading of zero.
            running = values(scrape(source), c.RUNNING.name, model_name=VLLM_MODEL)
            missed += not running
            peak = max([peak, *running])
            time.sleep(0.05)
    finally:
        done.set()
        for worker in workers:
            worker.join(300)
    assert peak >= 2, f"running requests never exceeded 1 under 6 concurrent clients ({missed} missed)"


def test_join_finds_the_servers_process_tree(source: VllmSource) -> None:
    procfs = ProcFs()
    port = urlsplit(VLLM_URL).port
    assert port is not None
    listening = procfs.listening_pids(port)
    assert listening, f"no process found listening on port {port}"
    pidfile = os.environ.get("SERVESCOPE_TEST_VLLM_PIDFILE")
    if pidfile and Path(pidfile).exists():
        assert int(Path(pidfile).read_text()) in listening
    tree = procfs.descendants(listening)
    children = tree - listening
    assert len(children) >= 2, f"expected EngineCore and Worker children, found {sorted(children)}"
    # No GPU here: let a fake NVML list the deepest child as the GPU process, as NVML would the Worker.
    worker = max(children)
    directory = GpuDirectory()
    directory.update({"0": "GPU-real-vllm"})
    directory.set_processes("GPU-real-vllm", frozenset({worker, 999_999}))
    joined = gpus_of_endpoint(f"{VLLM_URL}/metrics", procfs, directory)
    assert [(g.gpu, g.pid) for g in joined] == [("0", worker)]
    joined_source = VllmSource([f"{VLLM_URL}/metrics"], directory=directory)
    try:
        samples = scrape(joined_source)
    finally:
        joined_source.close()
    assert values(
        samples, c.ENGINE_GPU_INFO.name, model_name=VLLM_MODEL, gpu="0", uuid="GPU-real-vllm", pid=str(worker)
    ) == [1]


def test_derived_headroom_and_advice_from_the_real_server() -> None:
    # The serving board and the derived source on a real vLLM: KV headroom from its cache_config_info,
    # a token rate from its counters, and an advice step from its TTFT histogram.
    board = ServingBoard(3600, 1.0, latency="ttft", latency_window_seconds=60)
    clock = [time.monotonic()]
    made = VllmSource(
        [f"{VLLM_URL}/metrics"],
        directory=GpuDirectory(),
        interval_seconds=1.0,
        board=board,
        monotonic=lambda: clock[0],
    )
    derived = DerivedSource(MemoryHistory(), board, monotonic=lambda: clock[0])
    try:
        made.collect()
        with httpx.Client(timeout=120) as client:
            complete(client)
        clock[0] += 5
        made.collect()
        samples = derived.collect().samples
    finally:
        made.close()
    (track,) = board.engines()
    _, rates = board.series(track.tokens_rate, 60, clock[0])
    assert rates and rates[-1] > 0
    free = one(samples, m.KV_FREE_TOKENS.name)
    assert 0 < free <= (track.capacity_tokens or 0)
    if track.max_model_len:  # vLLM 0.11+ states kv_cache_max_concurrency
        assert one(samples, m.KV_FREE_REQUESTS.name) == pytest.approx(free / track.max_model_len)
    (advice,) = [s for s in samples if s.spec is m.RECOMMENDED_MAX_NUM_SEQS]
    assert advice.label_values[-1] in ("latency_over_slo", "within_slo", "no_traffic")
