"""Cost of the derived signals with full histories: one derived cycle, with and without trend refits.

An hour of 1 s samples for 8 GPUs and their 8 worker processes (a 40 MiB/min leak with an allocator
sawtooth and noise on one GPU), 4 engines with an hour of 5 s scrapes. Reports the median time of a
cycle that only reads peaks (the common case, every --derived-interval) and of one that refits every
trend and leak verdict (every 30 s), the CPU share that implies at the defaults, and the bytes held.
Usage: python bench/derived.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write
from servescope.exporter.derived.source import TREND_SECONDS, DerivedSource
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.stores.signals import GpuProcess
from servescope_sim.clock import FakeClock
from servescope_sim.node_harness import scrape_engine
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine

MIB = 1024**2
GIB = 1024**3
HOUR = 3600


class Node:
    """Synthetic GPUs and processes plus simulated engines, fed into a history and a board."""

    def __init__(self, gpus: int = 8, engines: int = 4) -> None:
        self.history = MemoryHistory(HOUR)
        self.board = ServingBoard(HOUR, 5.0)
        self.gpus = gpus
        self.rng = random.Random(1)
        per_engine = gpus // engines
        self.engines = []
        for e in range(engines):
            engine = SimulatedEngine(EngineConfig(arrival_rate=4.0), seed=e, model_name="bench")
            group = range(e * per_engine, (e + 1) * per_engine)
            self.engines.append((engine, [GpuProcess(str(g), f"GPU-{g}", 1000 + g) for g in group]))

    def feed(self, start: int, end: int) -> None:
        """NVML samples every second and engine scrapes every 5 s over [start, end)."""
        for t in range(start, end):
            for i in range(self.gpus):
                labels = (str(i), f"GPU-{i}", "bench")
                leak = 40 * MIB / 60 * t if i == 0 else 0.0
                used = 120 * GIB + leak + 128 * MIB * ((t / 45) % 1) + self.rng.gauss(0, 8 * MIB)
                self.history.record_gpu(
                    labels, float(t), used=used, capacity=140 * GIB, total=141 * GIB, utilization=0.6
                )
                self.history.record_process((*labels, str(1000 + i)), float(t), used=used - GIB)
            if t % 5:
                continue
            for e, (engine, gpus_of) in enumerate(self.engines):
                engine.advance_to(float(t))
                scrape_engine(self.board, f"http://e{e}/metrics", engine, gpus_of, float(t))


def time_cycles(node: Node, source: DerivedSource, clock: FakeClock, repeat: int) -> tuple[float, float]:
    """Median ms of a cycle that refits every trend, and of one right after it (trends cached)."""
    refit: list[float] = []
    cached: list[float] = []
    for _ in range(repeat):
        step = round(TREND_SECONDS)
        node.feed(round(clock.now), round(clock.now) + step)
        clock.now += step  # every trend is stale: a full refit
        started = time.perf_counter()
        source.collect()
        refit.append(time.perf_counter() - started)
        started = time.perf_counter()
        source.collect()  # same instant: trends cached, peaks and exhaustion recomputed
        cached.append(time.perf_counter() - started)
    return statistics.median(refit) * 1000, statistics.median(cached) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    node = Node()
    node.feed(0, HOUR)
    history, board = node.history, node.board
    clock = FakeClock(float(HOUR))
    source = DerivedSource(history, board, monotonic=clock)
    refit_ms, cached_ms = time_cycles(node, source, clock, args.repeat)
    # Defaults: a cycle every 5 s, a refit every 30 s -> per 30 s: 1 refit cycle + 5 cached cycles.
    cpu_share = (refit_ms + 5 * cached_ms) / 1000 / TREND_SECONDS
    data = {
        "machine": machine(),
        "tracks": {"gpus": 8, "processes": 8, "engines": 4, "history_seconds": HOUR},
        "cycle_with_refit_ms": round(refit_ms, 2),
        "cycle_cached_ms": round(cached_ms, 2),
        "cpu_share_at_defaults_percent": round(cpu_share * 100, 3),
        "history_bytes": history.nbytes() + board.nbytes(),
    }
    markdown = (
        "| derived cycle, 8 GPUs + 8 processes + 4 engines, 1 h history | median |\n|---|---|\n"
        f"| with every trend and leak verdict refit | {refit_ms:.1f} ms |\n"
        f"| peaks, exhaustion, KV, advice only | {cached_ms:.1f} ms |\n"
        f"| CPU at the defaults (5 s cycles, 30 s refits) | {cpu_share * 100:.2f}% of a core |\n"
        f"| sample rings held | {(history.nbytes() + board.nbytes()) / MIB:.2f} MiB |\n"
    )
    samples = source.collect().samples
    leak_flags = sum(1 for s in samples if s.spec.name == "servescope_gpu_memory_leak_suspected" and s.value)
    assert leak_flags == 1, f"expected the leaking GPU only, got {leak_flags} flags"
    assert math.isfinite(refit_ms)
    write("derived", data, markdown)


if __name__ == "__main__":
    main()
