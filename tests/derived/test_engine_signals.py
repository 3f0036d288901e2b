"""KV headroom, KV saturation, memory over budget and the batch advice, on simulated engine metrics."""

from __future__ import annotations

import math
from collections import deque

import pytest

from servescope.core.batch_controller import (
    GPU_UNDERUTILISED,
    LATENCY_OVER_SLO,
    NO_TRAFFIC,
    WITHIN_SLO,
)
from servescope.core.exposition import parse_exposition
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.derived.engine_signals import (
    AdvisorConfig,
    advise,
    kv_headroom,
    kv_saturation_seconds,
    over_budget,
)
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.ring import MemoryRing
from servescope.exporter.stores.serving_board import EngineTrack, ServingBoard
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.normalise import normalise
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import render_metrics

GIB = 1024**3


def _track(**kwargs: object) -> EngineTrack:
    rings = {name: MemoryRing(600, 5) for name in ("tokens_rate", "kv_usage", "running")}
    return EngineTrack("m", "0", "u", **rings, latency=deque(), **kwargs)  # type: ignore[arg-type]


def test_kv_headroom_in_tokens_and_max_length_requests() -> None:
    track = _track(capacity_tokens=1_048_576.0, max_model_len=8192.0)
    headroom = kv_headroom(track, 0.75)
    assert headroom is not None
    assert headroom.free_tokens == 262_144
    assert headroom.free_requests == 32
    assert kv_headroom(_track(capacity_tokens=1000.0), 0.5).free_requests is None  # type: ignore[union-attr]
    assert kv_headroom(_track(), 0.5) is None


def test_kv_saturation_time() -> None:
    assert kv_saturation_seconds(0.5, 0.001) == pytest.approx(500)
    assert kv_saturation_seconds(0.5, 0.0) == math.inf
    assert kv_saturation_seconds(0.5, None) == math.inf
    assert kv_saturation_seconds(1.0, 0.01) == 0.0


def test_memory_over_budget_counts_only_the_engines_processes() -> None:
    history = MemoryHistory()
    gpu = ("0", "GPU-0", "node")
    history.record_gpu(gpu, 1.0, used=99 * GIB, capacity=99.5 * GIB, total=100 * GIB, utilization=0.5)
    history.record_process((*gpu, "7"), 1.0, used=95 * GIB)
    history.record_process((*gpu, "8"), 1.0, used=3 * GIB)  # someone else's process on the same GPU
    track = _track(gpu_memory_utilization=0.9, gpus=[GpuProcess("0", "GPU-0", 7)])
    assert over_budget(track, history) == {("0", "GPU-0"): pytest.approx(5 * GIB)}
    assert over_budget(_track(gpus=[GpuProcess("0", "GPU-0", 7)]), history) == {}  # no budget stated


def _advice(config: EngineConfig, utilisation: float, seconds: int = 300) -> tuple[int, str]:
    """Run an engine, scrape it every 5 s into a board, record GPU utilisation, take the advice."""
    board = ServingBoard(3600, 5.0, latency="ttft", latency_window_seconds=60)
    history = MemoryHistory()
    gpu = ("0", "GPU-0", "node")
    engine = SimulatedEngine(config, seed=5, model_name="m")
    for t in range(0, seconds + 1):
        history.record_gpu(gpu, float(t), used=GIB, capacity=2 * GIB, total=2 * GIB, utilization=utilisation)
        if t % 5 == 0:
            engine.advance_to(float(t))
            families = parse_exposition(render_metrics(engine), keep=is_engine_family)
            board.record("u", normalise(families), [GpuProcess("0", "GPU-0", 1)], float(t))  # type: ignore[arg-type]
    (track,) = board.engines()
    advice = advise(track, board, history, AdvisorConfig(slo_seconds=0.5, max_num_seqs=16), float(seconds))
    return advice.value, advice.reason


def test_advice_shrinks_the_batch_when_p99_is_over_the_slo() -> None:
    # 40 req/s of long prompts against max_num_seqs 16: requests queue, TTFT P99 goes far past 0.5 s.
    value, reason = _advice(EngineConfig(arrival_rate=40.0, max_num_seqs=16, prompt_tokens=2048), 0.95)
    assert (value, reason) == (12, LATENCY_OVER_SLO)  # 16 x 0.8 = 12.8, rounded down


def test_advice_grows_the_batch_when_the_gpu_idles_within_slo() -> None:
    value, reason = _advice(EngineConfig(arrival_rate=1.0, max_num_seqs=16), 0.2)
    assert (value, reason) == (20, GPU_UNDERUTILISED)  # 16 x 1.2 = 19.2, rounded up


def test_advice_keeps_the_batch_when_busy_within_slo() -> None:
    assert _advice(EngineConfig(arrival_rate=1.0, max_num_seqs=16), 0.9) == (16, WITHIN_SLO)


def test_advice_holds_without_traffic() -> None:
    assert _advice(EngineConfig(arrival_rate=0.0, max_num_seqs=16), 0.0) == (16, NO_TRAFFIC)
