"""The engine's own view during a step: running/waiting samples and its TTFT histogram's delta."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from servescope.kit.load.records import EngineSample

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
TTFT = "vllm:time_to_first_token_seconds"
MAX_PAGE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class EnginePage:
    """What one /metrics page says: summed over the page's series (one engine, any models)."""

    running: float  # requests in the running batch (vllm:num_requests_running)
    waiting: float  # requests queued for the batch (vllm:num_requests_waiting)
    ttft_buckets: dict[float, float]  # upper bound `le` in seconds -> cumulative count
    ttft_sum: float = 0.0  # seconds
    ttft_count: float = 0.0


def _wanted(line: str) -> bool:
    name = line[7:] if line.startswith(("# TYPE ", "# HELP ")) else line
    return name.startswith((RUNNING, WAITING, TTFT))


def parse_page(text: str) -> EnginePage:
    """The running/waiting gauges and cumulative TTFT buckets (by upper bound) of one exposition page."""
    running = waiting = ttft_sum = ttft_count = 0.0
    buckets: dict[float, float] = {}
    # Only the three families are parsed: a whole vLLM page costs tens of ms of the loop that sends.
    wanted = "\n".join(line for line in text.splitlines() if _wanted(line)) + "\n"
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            if sample.name == RUNNING:
                running += sample.value
            elif sample.name == WAITING:
                waiting += sample.value
            elif sample.name == f"{TTFT}_bucket":
                upper = float(sample.labels["le"])
                buckets[upper] = buckets.get(upper, 0.0) + sample.value
            elif sample.name == f"{TTFT}_sum":
                ttft_sum += sample.value
            elif sample.name == f"{TTFT}_count":
                ttft_count += sample.value
    return EnginePage(running, waiting, buckets, ttft_sum, ttft_count)


def bucket_delta(before: dict[float, float], after: dict[float, float]) -> tuple[tuple[float, float], ...]:
    """Cumulative bucket counts gained between two pages (a counter reset counts from zero)."""
    reset = any(after.get(upper, 0.0) < count for upper, count in before.items())
    base = {} if reset else before
    return tuple(sorted((upper, count - base.get(upper, 0.0)) for upper, count in after.items()))


@dataclass
class EngineWatch:
    """Polls an engine's /metrics through a step; failures are counted, never raised."""

    url: str
    interval_s: float = 0.5
    samples: list[EngineSample] = field(default_factory=list)
    failures: int = 0
    first: EnginePage | None = None
    last: EnginePage | None = None

    async def read(self, client: httpx.AsyncClient) -> EnginePage | None:
        try:
            response = await client.get(self.url, timeout=2.0)
            if response.status_code != 200 or len(response.content) > MAX_PAGE_BYTES:
                raise ValueError(f"{self.url}: HTTP {response.status_code}, {len(response.content)} bytes")
            return parse_page(response.text)
        except (httpx.HTTPError, ValueError):
            self.failures += 1
            return None

    async def run(self, client: httpx.AsyncClient, clock: Callable[[], float], stop: asyncio.Event) -> None:
        """Sample until `stop` is set, then read one last page for the histogram's delta."""
        while True:
            page = await self.read(client)
            if page is not None:
                self.first = self.first or page
                self.last = page
                self.samples.append(EngineSample(clock(), page.running, page.waiting))
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)

    def ttft_mean_s(self) -> float | None:
        """The engine's mean TTFT over the step; None without requests counted or across a reset."""
        if self.first is None or self.last is None:
            return None
        count = self.last.ttft_count - self.first.ttft_count
        total = self.last.ttft_sum - self.first.ttft_sum
        return total / count if count > 0 and total >= 0 else None

    def ttft_buckets(self) -> tuple[tuple[float, float], ...]:
        if self.first is None or self.last is None:
            return ()
        return bucket_delta(self.first.ttft_buckets, self.last.ttft_buckets)


def metrics_url(base_url: str) -> str:
    """Where an OpenAI-compatible vLLM serves its metrics: /metrics beside /v1."""
    return base_url.rstrip("/").removesuffix("/v1") + "/metrics"
