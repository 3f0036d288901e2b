"""DCGM costs: dmon parser throughput (rows/s, every layout) and the supervisor's CPU while streaming.

The CPU figure is this process's own CPU time (the supervisor and reader threads, and one collect()
per second as the source runner does) while the fake dcgmi streams 8 GPUs x 20 fields at 1 s; the
fake's own CPU is a child's and not counted.
Usage: python bench/dcgm.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write
from servescope.core.dcgm.counters import load_counters
from servescope.core.dcgm.dmon_format import LAYOUTS, Column, DmonParser, Row, render_header, render_row
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.gpu_directory import GpuDirectory

FAKE = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))


def stream(layout: str, gpus: int = 8, fields: int = 20, iterations: int = 2500) -> list[str]:
    lay = LAYOUTS[layout]
    columns = [Column(f"F{i:03d}", 8) for i in range(fields)]
    lines: list[str] = []
    for it in range(iterations):
        if it % 14 == 0:
            lines += render_header(lay, columns)
        for gpu in range(gpus):
            values = [
                "N/A" if (gpu + i) % 7 == 0 else f"{(it * 31 + i) % 997}.{gpu}25" for i in range(fields)
            ]
            lines.append(render_row(lay, f"GPU {gpu}", columns, values))
    return lines


def parser_rows_per_second(layout: str) -> float:
    lines = stream(layout)
    best = 0.0
    for _ in range(3):
        parser = DmonParser()
        started = time.perf_counter()
        rows = sum(1 for line in lines if isinstance(parser.feed(line), Row))
        best = max(best, rows / (time.perf_counter() - started))
    return best


def supervisor_cpu(seconds: float) -> dict[str, float]:
    counters = load_counters()[:20]
    env = {**os.environ, "SERVESCOPE_FAKE_DCGMI_GPUS": "8"}
    source = DmonSource(
        counters,
        dcgmi=FAKE,
        hostname="bench",
        directory=GpuDirectory(),
        interval_seconds=1.0,
        spawn=lambda argv: spawn_process(argv, env=env),
    )
    try:
        source.collect()
        time.sleep(3)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu0, wall0 = usage.ru_utime + usage.ru_stime, time.monotonic()
        collected = 0
        while time.monotonic() - wall0 < seconds:
            collected = len(source.collect().samples)
            time.sleep(1.0)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime - cpu0
        return {
            "cpu_percent": cpu / (time.monotonic() - wall0) * 100,
            "samples_per_collect": collected,
            "restarts": source.supervisor.status.restarts,
        }
    finally:
        source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    rates = {layout: parser_rows_per_second(layout) for layout in sorted(LAYOUTS)}
    cpu = supervisor_cpu(args.seconds)
    lines = [
        "# DCGM benchmark",
        "",
        f"Machine: {machine()}",
        "",
        "Parser throughput (8 GPUs x 20 fields per row, pure Python, best of 3):",
        "",
        "| layout | rows/s |",
        "| --- | --- |",
        *[f"| DCGM {layout} | {rate:,.0f} |" for layout, rate in rates.items()],
        "",
        f"Supervisor while streaming 8 GPUs x 20 fields at 1 s for {args.seconds:g} s: "
        f"{cpu['cpu_percent']:.2f} % of one core ({cpu['samples_per_collect']:.0f} samples per collect, "
        f"{cpu['restarts']:.0f} restarts).",
        "",
        "Targets: >= 50,000 rows/s; supervisor < 1 % of a core.",
        "",
    ]
    write(
        "dcgm", {"machine": machine(), "parser_rows_per_second": rates, "supervisor": cpu}, "\n".join(lines)
    )


if __name__ == "__main__":
    main()
