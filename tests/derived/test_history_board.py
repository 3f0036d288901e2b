"""Sample histories stay bounded; the serving board reads engines through the real parser."""

from __future__ import annotations

import pytest

from servescope.core.exposition import parse_exposition
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.stores.history import PROCESS_STALE_SECONDS, MemoryHistory
from servescope.exporter.stores.ring import BYTES_PER_SAMPLE
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.normalise import normalise
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import render_metrics

GIB = 1024**3


def _gpu(i: int) -> tuple[str, str, str]:
    return (str(i), f"GPU-{i}", "node")


def test_history_memory_is_fixed_and_does_not_grow_over_three_hours() -> None:
    history = MemoryHistory(retention_seconds=3600)
    for t in range(3 * 3600):
        for i in range(8):
            history.record_gpu(
                _gpu(i), float(t), used=70 * GIB + t, capacity=140 * GIB, total=141 * GIB, utilization=0.5
            )
            history.record_process((*_gpu(i), str(1000 + i)), float(t), used=60 * GIB + t)
        if t == 3600:
            after_one_hour = history.nbytes()
    # 8 GPUs x (memory + utilisation rings) + 8 processes x 1 ring, each 3600 slots of 16 bytes.
    assert history.nbytes() == after_one_hour == (8 * 2 + 8) * 3600 * BYTES_PER_SAMPLE
    assert all(len(track.memory) == 3600 for track in history.gpus())
    assert history.nbytes() <= history.max_nbytes()


def test_exited_processes_are_forgotten_and_the_track_cap_is_counted() -> None:
    history = MemoryHistory(retention_seconds=3600, max_tracks=3)
    history.record_gpu(_gpu(0), 0.0, used=1.0, capacity=2.0, total=2.0, utilization=None)
    history.record_process((*_gpu(0), "11"), 0.0, used=1.0)
    history.record_process((*_gpu(0), "12"), 0.0, used=1.0)
    history.record_process((*_gpu(0), "13"), 0.0, used=1.0)  # a fourth track: refused, counted
    assert history.refused == 1
    assert [t.labels[3] for t in history.processes()] == ["11", "12"]
    history.record_process((*_gpu(0), "11"), PROCESS_STALE_SECONDS, used=1.0)
    history.prune(PROCESS_STALE_SECONDS + 1)
    assert [t.labels[3] for t in history.processes()] == ["11"]
    assert history.find_gpu("0") is history.find_gpu("GPU-0") is not None
    assert history.find_gpu("7") is None


def _scrape(engine: SimulatedEngine, generation: str = "current"):  # type: ignore[no-untyped-def]
    return normalise(parse_exposition(render_metrics(engine, generation), keep=is_engine_family))  # type: ignore[arg-type]


def test_board_rates_kv_and_latency_from_engine_metrics() -> None:
    board = ServingBoard(3600, 5.0, latency="ttft", latency_window_seconds=60)
    engine = SimulatedEngine(EngineConfig(arrival_rate=4.0), seed=3, model_name="m")
    gpus = [GpuProcess("0", "GPU-0", 4242)]
    for t in range(0, 600, 5):
        engine.advance_to(float(t))
        board.record("http://e:8000/metrics", _scrape(engine), gpus, float(t))
    (track,) = board.engines()
    assert track.labels == ("m", "0", "http://e:8000/metrics")
    assert board.engines_on("GPU-0") == [track]
    assert board.engines_on("GPU-1") == []
    _, rates = board.series(track.tokens_rate, 600, 600)
    # 4 req/s x (512 prompt + 128 generated) tokens, less the prefix-cache share; the engine's truth:
    mean = sum(rates[12:]) / len(rates[12:])
    assert 1500 < mean < 3000
    assert track.capacity_tokens == 65_536 * 16
    assert track.max_model_len == 8192
    assert track.gpu_memory_utilization == pytest.approx(0.9)
    # Only the snapshots spanning the advisor window are kept (one at or before its start).
    assert 2 <= len(track.latency) <= 60 / 5 + 2
    assert track.latency[1][0] > 595 - 60


def test_board_skips_the_interval_across_an_engine_restart() -> None:
    board = ServingBoard(3600, 5.0)
    engine = SimulatedEngine(EngineConfig(arrival_rate=4.0), seed=3, model_name="m")
    for t in range(0, 300, 5):
        if t == 150:
            engine.set_down(True)
            engine.set_down(False)  # restarted: counters from zero
        engine.advance_to(float(t))
        board.record("u", _scrape(engine), [], float(t))
    (track,) = board.engines()
    _, rates = board.series(track.tokens_rate, 300, 300)
    assert rates and min(rates) >= 0
    assert len(rates) == 300 / 5 - 2  # the first scrape has no rate, the restart interval is skipped


def test_board_legacy_engine_states_no_max_model_len() -> None:
    board = ServingBoard(3600, 5.0)
    engine = SimulatedEngine(seed=1, model_name="m")
    board.record("u", _scrape(engine, "legacy"), [], 0.0)
    (track,) = board.engines()
    assert track.max_model_len is None
    assert track.capacity_tokens == 65_536 * 16


def test_board_rejects_unknown_latency_histogram() -> None:
    with pytest.raises(ValueError, match="latency histogram 'p50'"):
        ServingBoard(latency="p50")
