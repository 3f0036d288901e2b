"""Rollouts whose truth is known, scraped into OpenMetrics and backfilled into a real Prometheus.

Each revision of a model is one engine pod whose requests follow a stated distribution: time to first
token lognormal (median, sigma), inter-token gaps lognormal, end to end lognormal around TTFT plus the
gaps of 30 tokens, 0.5 % aborted, 0.02 preemptions per request. Every 30 s scrape adds the counts of that
interval, drawn from the distribution (Poisson arrivals; histogram counts multinomial over vLLM's own
bucket bounds, what independent requests give), named as the PodMonitor topology stores them: vLLM's
series with the pod's `revision`. promtool imports them, then backfills the bundle's per-revision
records over the same range; queries are answered at `END`, the last scrape.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.quality.prom import Prometheus, create_blocks
from servescope.bundle.alerts.rules_canary import records
from servescope.core.config import AlertsConfig
from servescope_sim.engine_stats import REQUEST_SECONDS_BUCKETS, TOKEN_LATENCY_BUCKETS, TTFT_BUCKETS
from tests.dashboards.history import backfill_rules

HOUR = 3600.0
SCRAPE_S = 30.0
DURATION_S = 15 * 60.0
START = (time.time() // HOUR - 3) * HOUR  # three hours ago, on the hour: inside the TSDB's range
END = START + DURATION_S
PODMONITOR = AlertsConfig(engine_topology="podmonitor", engine_selector='job="vllm"')
NAMESPACE = "serving"
RECORD = re.compile(r"model_revision(?:_le)?:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+")


@dataclass(frozen=True)
class Behaviour:
    """What one revision's requests are like: the ground truth the analysis must find."""

    rate: float  # requests per second
    ttft_median: float  # seconds; lognormal with ttft_sigma
    ttft_sigma: float = 0.45
    itl_median: float = 0.03
    itl_sigma: float = 0.35
    tokens: int = 30
    aborted: float = 0.005
    preemptions: float = 0.02  # per request
    kv_usage: float = 0.3

    @property
    def e2e_median(self) -> float:
        return self.ttft_median + self.tokens * self.itl_median


STABLE = Behaviour(18.0, 0.12)  # P99 TTFT 0.34 s, 0.08 % over the 0.5 s bound
SLOWER = Behaviour(2.0, 0.24, kv_usage=0.1)  # 10 % of the traffic, every TTFT quantile twice the stable's
EQUAL = Behaviour(2.0, 0.12, kv_usage=0.1)  # 10 % of the traffic, the stable's distributions
TRICKLE = Behaviour(0.05, 0.24, kv_usage=0.01)  # twice as slow, 30 requests in 10 minutes


@dataclass(frozen=True)
class Revision:
    model: str
    revision: str
    pod: str
    address: str
    behaviour: Behaviour

    def labels(self) -> str:
        pairs = {
            "job": "vllm",
            "instance": "node-a",
            "namespace": NAMESPACE,
            "pod": self.pod,
            "model_name": self.model,
            "engine": "0",
            "endpoint": f"http://{self.address}:8000/metrics",
            "revision": self.revision,
        }
        return ",".join(f'{key}="{value}"' for key, value in pairs.items())


@dataclass(frozen=True)
class Rollout:
    """A model with its stable Deployment `<target>-primary` and its canary `<target>` (Flagger's names)."""

    model: str
    target: str
    stable: Revision
    canary: Revision


def rollout(index: int, model: str, canary: Behaviour, stable: Behaviour = STABLE) -> Rollout:
    target = f"vllm-{index}"
    canary_hash, stable_hash = f"c{index:04d}aa9f", f"s{index:04d}bb8e"
    return Rollout(
        model,
        target,
        Revision(
            model,
            stable_hash,
            f"{target}-primary-{stable_hash}-x7k2p",
            f"10.1.{index // 250}.{index % 250 + 1}",
            stable,
        ),
        Revision(
            model,
            canary_hash,
            f"{target}-{canary_hash}-q4m9z",
            f"10.2.{index // 250}.{index % 250 + 1}",
            canary,
        ),
    )


WORSE = rollout(0, "rollout-worse", SLOWER)
SAME = rollout(1, "rollout-equal", EQUAL)
LITTLE = rollout(2, "rollout-little", TRICKLE)
SEEDS = tuple(rollout(10 + seed, f"equal-{seed:03d}", EQUAL) for seed in range(100))


def _lognormal_shares(bounds: tuple[float, ...], median: float, sigma: float) -> np.ndarray:
    """The probability of each bucket (le_{i-1}, le_i] and of the +Inf one."""
    cdf = [0.5 * math.erfc(-(math.log(b) - math.log(median)) / (sigma * math.sqrt(2))) for b in bounds]
    edges = np.array([0.0, *cdf, 1.0])
    return np.diff(edges)


def _le(bound: float) -> str:
    return repr(float(bound))  # as vLLM writes them: 0.5, 1.0, 2560.0


class Series:
    """Sample lines by sample name: promtool wants a family's samples together, in time order."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}

    def add(self, name: str, labels: str, value: float, at: float) -> None:
        self.lines.setdefault(name, []).append(f"{name}{{{labels}}} {value:.17g} {at:.3f}\n")

    def write(self, path: Path) -> None:
        with path.open("w") as out:
            for name in sorted(self.lines):
                out.writelines(self.lines[name])
            out.write("# EOF\n")


def scrape_revision(series: Series, revision: Revision, seed: int) -> None:
    """Every scrape of one engine from START to END, its counters drawn from its behaviour."""
    truth, labels = revision.behaviour, revision.labels()
    draw = np.random.default_rng(seed)
    layouts = {
        "vllm:time_to_first_token_seconds": (TTFT_BUCKETS, truth.ttft_median, truth.ttft_sigma, 1),
        "vllm:inter_token_latency_seconds": (
            TOKEN_LATENCY_BUCKETS,
            truth.itl_median,
            truth.itl_sigma,
            truth.tokens,
        ),
        "vllm:e2e_request_latency_seconds": (REQUEST_SECONDS_BUCKETS, truth.e2e_median, 0.25, 1),
    }
    totals = {name: np.zeros(len(bounds) + 1) for name, (bounds, *_) in layouts.items()}
    finished = {"stop": 0.0, "abort": 0.0}
    preemptions = 0.0
    for k in range(1, int(DURATION_S / SCRAPE_S) + 1):
        at = START + k * SCRAPE_S
        requests = int(draw.poisson(truth.rate * SCRAPE_S))
        for name, (bounds, median, sigma, per_request) in layouts.items():
            totals[name] += draw.multinomial(requests * per_request, _lognormal_shares(bounds, median, sigma))
            cumulative = np.cumsum(totals[name])
            for bound, value in zip((*map(_le, bounds), "+Inf"), cumulative, strict=True):
                series.add(f"{name}_bucket", f'{labels},le="{bound}"', value, at)
            series.add(f"{name}_count", labels, cumulative[-1], at)
        aborted = int(draw.binomial(requests, truth.aborted))
        finished["abort"] += aborted
        finished["stop"] += requests - aborted
        for reason, value in finished.items():
            series.add("vllm:request_success_total", f'{labels},finished_reason="{reason}"', value, at)
        preemptions += int(draw.poisson(requests * truth.preemptions))
        series.add("vllm:num_preemptions_total", labels, preemptions, at)
        series.add("vllm:num_requests_running", labels, 1.0, at)
        series.add("vllm:kv_cache_usage_perc", labels, truth.kv_usage, at)


def scrape_user_buckets(series: Series, shown: Rollout, canary_buckets: int = 10, buckets: int = 100) -> None:
    """`servescope load --user-id-header` sending 0.2 req/s from each of 100 user buckets; the gateway
    routes buckets 00-09 to the canary and names the revision that answered."""
    target = 'job="servescope-load",instance="loadgen:9400"'
    for k in range(1, int(DURATION_S / SCRAPE_S) + 1):
        for bucket in range(buckets):
            revision = shown.canary.revision if bucket < canary_buckets else shown.stable.revision
            labels = f'{target},user_bucket="{bucket:02d}",revision="{revision}"'
            series.add(
                "servescope_load_user_requests_total", labels, 0.2 * SCRAPE_S * k, START + k * SCRAPE_S
            )


def record_passes() -> list[dict[str, Any]]:
    """The per-revision records as rule groups, one per level of dependency: promtool evaluates a rule
    over the data it is given, so a record read by another must be backfilled first."""
    rules = records(PODMONITOR).render(PODMONITOR)["rules"]
    done: set[str] = set()
    passes = []
    while len(done) < len(rules):
        ready = [
            rule
            for rule in rules
            if rule["record"] not in done
            and all(name in done for name in RECORD.findall(rule["expr"]) if name != rule["record"])
        ]
        assert ready, "a record reads one that is never recorded"
        done |= {rule["record"] for rule in ready}
        passes.append(
            {"name": f"canary-records-{len(passes)}", "interval": f"{SCRAPE_S:.0f}s", "rules": ready}
        )
    return passes


def backfill(work: Path, rollouts: Iterable[Rollout]) -> Path:
    """A TSDB under `work` holding every rollout's series and the per-revision records over them."""
    series = Series()
    for index, shown in enumerate(rollouts):
        scrape_revision(series, shown.stable, 2 * index)
        scrape_revision(series, shown.canary, 2 * index + 1)
    scrape_user_buckets(series, WORSE)
    scraped = work / "rollouts.om"
    series.write(scraped)
    tsdb = work / "tsdb"
    create_blocks(scraped, tsdb)
    for level, group in enumerate(record_passes()):
        rules = work / f"records-{level}.yaml"
        rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False, width=1000))
        with Prometheus(tsdb) as raw:
            recorded = _backfill_rules(raw.port, rules, work / f"records-{level}")
        for block in recorded.iterdir():  # the records' blocks join the raw ones: the next level reads them
            if block.is_dir():
                shutil.move(block, tsdb / block.name)
    return tsdb


def _backfill_rules(port: int, rules: Path, out: Path) -> Path:
    """promtool's blocks of `rules` evaluated over the whole range, every scrape, into `out`."""
    backfill_rules(port, out, rules=rules, start=START, end=END + 2 * SCRAPE_S, interval=f"{SCRAPE_S:.0f}s")
    return out


def all_rollouts() -> Iterator[Rollout]:
    yield from (WORSE, SAME, LITTLE, *SEEDS)
