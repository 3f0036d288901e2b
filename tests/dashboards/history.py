"""Fifteen minutes of two simulated nodes, made in seconds and backfilled into a real Prometheus.

The nodes run the production collectors (NVML, vLLM, derived, and DCGM over a fed `dcgmi dmon`) on a
fake clock, through the alert-quality benchmark's node (bench/quality): `node-leak` plays memory-leak
(so growth rates, exhaustion and the leak verdict exist), `node-faults` hardware-faults (XIDs, NVLink
CRC errors, PCIe replays, a lost GPU). Each node's scrapes go into one OpenMetrics file, which promtool
imports into TSDB blocks; the bundle's recording rules are then backfilled over the same range with
`promtool tsdb create-blocks-from rules` (against a Prometheus over the raw blocks), and the caller's
Prometheus serves both. Queries are answered at `END`, the instant of the last scrape.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import generate_latest

from bench.quality.hardware import Hardware
from bench.quality.node import Node, Timing
from bench.quality.openmetrics import SeriesBuffer
from bench.quality.prom import Prometheus, create_blocks
from bench.quality.runs import BASE_WALL
from servescope.core.catalog import CATALOG
from servescope.core.dcgm.counters import load_counters, specs_of
from servescope.exporter.publisher import Publisher
from servescope.exporter.runner import SourceRunner
from servescope.exporter.runtime import process_families
from servescope.kit.load.metrics import LoadMetrics
from servescope.kit.load.records import RequestRecord, StepResult
from servescope_sim.registry import make_scenario
from servescope_sim.vllm_engine import EngineConfig
from tests.alerts.promtool import RULES
from tests.dashboards.dcgm_feed import DcgmFeed

# Growth rates need half of their 5 min window of history, the leak verdict 4 min.
SIMULATED_SECONDS = 900.0
# NVML every second, as in production; a scrape every 5 s, so that rate(...[30s]) has enough samples.
TIMING = Timing(nvml_interval=1.0, scrape_interval=5.0)
START = BASE_WALL
END = BASE_WALL + SIMULATED_SECONDS
# Four H200s, two engines of two GPUs each; the hardware-faults node loses a GPU (XID 79).
HARDWARE = Hardware(4, "H200", ((0, 1), (2, 3)), nvlinks=None, xid_events=True)
RULES_EVAL_INTERVAL = "30s"
LONGEST_GROUP_INTERVAL_SECONDS = 300


@dataclass(frozen=True)
class NodePlan:
    hostname: str
    scenario: str
    seed: int

    @property
    def instance(self) -> str:
        return f"{self.hostname}:9108"


NODES = (NodePlan("node-leak", "memory-leak", 1), NodePlan("node-faults", "hardware-faults", 2))


def simulate(plan: NodePlan, work: Path) -> Path:
    """Run one node for SIMULATED_SECONDS; the OpenMetrics file of everything it exported."""
    node = Node(
        make_scenario(plan.scenario),
        HARDWARE,
        seed=plan.seed,
        wall_start=START,
        engine_config=EngineConfig(),
        timing=TIMING,
        hostname=plan.hostname,
        # As the runtime publishes: the DCGM counters' families, and this process's own process_*.
        publisher=Publisher(
            simulated=True, extra=[process_families()], catalog=[*CATALOG, *specs_of(load_counters())]
        ),
    )
    dcgm = DcgmFeed(node.fleet, node.nvml.directory, plan.hostname, TIMING.scrape_interval, node.clock)
    node.runners.append(SourceRunner(dcgm, node.publisher, monotonic=node.clock, wall=node.wall.wall))
    buffer = SeriesBuffer(plan.instance)
    try:
        node.run(SIMULATED_SECONDS, lambda t, body: buffer.add(body, START + t))
    finally:
        node.close()
    path = work / f"{plan.hostname}.om"
    buffer.write(path)
    return path


# The SLO's long windows are recorded from its 5 min records: promtool evaluates each rule over the data
# it is given, so a rule reading another rule's output needs a second pass over the first pass's blocks.
RULE_PASSES = 2


def load_generator(work: Path) -> Path:
    """`servescope load`'s own metrics over the same range: an open-loop run at 5 req/s whose TTFT grows
    with a backlog and whose every 20th request times out (so every load panel has data)."""
    metrics = LoadMetrics()
    buffer = SeriesBuffer("loadgen:9400", job="servescope-load")
    metrics.step_started("open", 5.0)
    for tick in range(1, int(SIMULATED_SECONDS / TIMING.scrape_interval) + 1):
        for n in range(5 * int(TIMING.scrape_interval)):
            due = tick * TIMING.scrape_interval + n / 5.0
            metrics.sent(0.002)
            error = "timeout" if n % 20 == 0 else None
            done = None if error else due + 0.3
            metrics.finished(RequestRecord(due, due + 0.002, due + 0.05 + tick / 1000, done, 16, 8, error))
        step = StepResult("open", 5.0, TIMING.scrape_interval, ())
        metrics.step_finished(step)
        buffer.add(generate_latest(metrics.registry).decode(), START + tick * TIMING.scrape_interval)
    path = work / "loadgen.om"
    buffer.write(path)
    return path


def capacity_results(work: Path) -> Path:
    """Two weekly capacity runs' results (what the CronJob remote-writes), early and late in the range."""
    buffer = SeriesBuffer("capacity", job="servescope-capacity")
    run = 'target="staging",label="staging"'
    for at, knee, regression in ((START + 60, 16.2, 0), (END - 60, 14.1, 1)):
        lines = [
            f"servescope_capacity_knee_requests_per_second{{{run}}} {knee}",
            f"servescope_capacity_knee_lower_requests_per_second{{{run}}} {knee * 0.95}",
            f"servescope_capacity_knee_upper_requests_per_second{{{run}}} {knee * 1.05}",
            f"servescope_capacity_baseline_knee_requests_per_second{{{run}}} 16.2",
            f"servescope_capacity_regression{{{run}}} {regression}",
        ]
        buffer.add("\n".join(lines) + "\n", at)
    path = work / "capacity.om"
    buffer.write(path)
    return path


def backfill(work: Path) -> Path:
    """A TSDB under `work` holding both nodes' series and the recording rules evaluated over them."""
    tsdb = work / "tsdb"
    for plan in NODES:
        create_blocks(simulate(plan, work), tsdb)
    create_blocks(load_generator(work), tsdb)
    create_blocks(capacity_results(work), tsdb)
    for rule_pass in range(RULE_PASSES):
        records = work / f"records-{rule_pass}"
        with Prometheus(tsdb) as raw:
            backfill_rules(raw.port, records)
        for block in records.iterdir():
            if block.is_dir():
                shutil.move(block, tsdb / block.name)
    return tsdb


def backfill_rules(
    port: int,
    records: Path,
    *,
    rules: Path = RULES,
    start: float = START,
    # Past the last scrape by the longest group interval (5 min), so that group has a point at END.
    end: float = END + LONGEST_GROUP_INTERVAL_SECONDS,
    interval: str = RULES_EVAL_INTERVAL,
) -> None:
    """The blocks of `rules` evaluated by promtool over [start, end] (against the Prometheus on `port`),
    into `records`."""
    done = subprocess.run(
        [
            shutil.which("promtool") or "promtool",
            "tsdb",
            "create-blocks-from",
            "rules",
            f"--start={start:.0f}",
            f"--end={end:.0f}",
            f"--url=http://127.0.0.1:{port}",
            f"--output-dir={records}",
            f"--eval-interval={interval}",
            str(rules),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"promtool could not backfill the recording rules: {done.stderr[-2000:]}")
