"""Per-engine derived signals: KV headroom, time to KV saturation, memory over budget, batch advice."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from servescope.core.batch_controller import (
    NO_TRAFFIC,
    Recommendation,
    p99_from_deltas,
    recommend,
)
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.serving_board import EngineTrack, ServingBoard


@dataclass(frozen=True)
class AdvisorConfig:
    """The operators' controller settings (see advisor.controller)."""

    slo_seconds: float = 0.5
    low_utilisation: float = 0.5
    max_num_seqs: int = 256  # what the engines run: vLLM does not export it
    max_seqs: int = 1024
    window_seconds: float = 60.0


@dataclass(frozen=True)
class KvHeadroom:
    free_tokens: float
    free_requests: float | None


def kv_headroom(track: EngineTrack, usage: float) -> KvHeadroom | None:
    if not track.capacity_tokens:
        return None
    free = track.capacity_tokens * min(1.0, max(0.0, 1.0 - usage))
    return KvHeadroom(free, free / track.max_model_len if track.max_model_len else None)


def kv_saturation_seconds(usage: float, slope_per_second: float | None) -> float:
    if usage >= 1.0:
        return 0.0
    if slope_per_second is None or slope_per_second <= 0:
        return math.inf
    return (1.0 - usage) / slope_per_second


def over_budget(track: EngineTrack, history: MemoryHistory) -> dict[tuple[str, str], float]:
    """(gpu, uuid) -> bytes of the engine's processes on that GPU beyond gpu_memory_utilization x total."""
    if track.gpu_memory_utilization is None:
        return {}
    pids: dict[str, set[int]] = defaultdict(set)
    index: dict[str, str] = {}
    for g in track.gpus:
        pids[g.uuid].add(g.pid)
        index[g.uuid] = g.gpu
    out: dict[tuple[str, str], float] = {}
    for uuid, wanted in pids.items():
        gpu = history.find_gpu(uuid)
        if gpu is None or gpu.total <= 0:
            continue
        held = 0.0
        for proc in history.processes_of(uuid):
            latest = proc.memory.latest()
            if latest is not None and int(proc.labels[3]) in wanted:
                held += latest[1]
        out[(index[uuid], uuid)] = held - track.gpu_memory_utilization * gpu.total
    return out


def advise(
    track: EngineTrack, board: ServingBoard, history: MemoryHistory, config: AdvisorConfig, now: float
) -> Recommendation:
    """One step of the controller from live metrics over the advisor window."""
    _, running = board.series(track.running, config.window_seconds, now)
    current = max([config.max_num_seqs, *(round(r) for r in running)])
    snapshots = board.latency_window(track)
    p99 = None
    if snapshots is not None:
        try:
            p99 = p99_from_deltas(*snapshots)
        except ValueError:
            p99 = None  # a histogram without +Inf or finite bounds cannot give a quantile
    utilisations: list[float] = []
    for uuid in {g.uuid for g in track.gpus}:
        gpu = history.find_gpu(uuid)
        if gpu is not None:
            utilisations += history.utilization_window(gpu, config.window_seconds, now)[1]
    # Without a joined GPU only the latency rule can act: utilisation counts as not low.
    utilisation = sum(utilisations) / len(utilisations) if utilisations else 1.0
    if p99 is None:
        return Recommendation(min(current, config.max_seqs), NO_TRAFFIC)
    return recommend(
        current,
        p99,
        utilisation=min(1.0, max(0.0, utilisation)),
        slo=config.slo_seconds,
        low_util=config.low_utilisation,
        max_seqs=max(config.max_seqs, 1),
    )
