"""The engine's own view during a step, sampled on a thread of its own, off the sending path.

Running/waiting samples (the backlog test), its TTFT histogram's delta (the client-versus-engine cross
check) and its token counter's delta (the throughput check). Reading and parsing a vLLM page costs
milliseconds; in the event loop that sends, each read would delay the sends due meanwhile, so the watch
runs on its own thread with its own blocking client, and its CPU is kept apart from the client's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import httpx

from servescope.core.exposition import parse_exposition
from servescope.kit.load.records import EngineSample, RequestRecord, Throughput, delivered
from servescope.kit.load.validity import EngineView

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
TTFT = "vllm:time_to_first_token_seconds"
GENERATION = "vllm:generation_tokens"
MAX_PAGE_BYTES = 4 * 1024 * 1024
READ_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class EnginePage:
    """What one /metrics page says: summed over the page's series (one engine, any models)."""

    running: float  # requests in the running batch (vllm:num_requests_running)
    waiting: float  # requests queued for the batch (vllm:num_requests_waiting)
    ttft_buckets: dict[float, float]  # upper bound `le` in seconds -> cumulative count
    ttft_sum: float = 0.0  # seconds
    ttft_count: float = 0.0
    generation_tokens: float | None = None  # vllm:generation_tokens_total; None when not exported


def _wanted(family: str) -> bool:
    return family.startswith((RUNNING, WAITING, TTFT, GENERATION))


def parse_page(text: str) -> EnginePage:
    """The running/waiting gauges, cumulative TTFT buckets (by upper bound) and the token counter."""
    running = waiting = ttft_sum = ttft_count = 0.0
    tokens: float | None = None
    buckets: dict[float, float] = {}
    # Only the families read here are kept: the parser skips the rest of the page's lines cheaply.
    for family in parse_exposition(text, keep=_wanted):
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
            elif sample.name == f"{GENERATION}_total":
                tokens = (tokens or 0.0) + sample.value
    return EnginePage(running, waiting, buckets, ttft_sum, ttft_count, tokens)


def bucket_delta(before: dict[float, float], after: dict[float, float]) -> tuple[tuple[float, float], ...]:
    """Cumulative bucket counts gained between two pages (a counter reset counts from zero)."""
    reset = any(after.get(upper, 0.0) < count for upper, count in before.items())
    base = {} if reset else before
    return tuple(sorted((upper, count - base.get(upper, 0.0)) for upper, count in after.items()))


@dataclass
class EngineWatch:
    """Polls an engine's /metrics on its own thread through a step; failures are counted, never raised.

    `open()` reads the first page (just before the first send), `start()` samples every `interval_s`
    on the step's clock, `close()` stops the thread and reads the last page (after the last answer).
    """

    url: str
    interval_s: float = 0.5
    samples: list[EngineSample] = field(default_factory=list)
    failures: int = 0
    first: EnginePage | None = None
    last: EnginePage | None = None
    first_at: float = 0.0  # perf_counter of the first page read, and of the last
    last_at: float = 0.0
    cpu_s: float = 0.0  # CPU the sampling thread used (kept out of the client's cost)
    _client: httpx.Client | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def read(self) -> EnginePage | None:
        client = self._client or httpx.Client(trust_env=False, timeout=READ_TIMEOUT_S)
        self._client = client
        try:
            response = client.get(self.url)
            if response.status_code != 200 or len(response.content) > MAX_PAGE_BYTES:
                raise ValueError(f"{self.url}: HTTP {response.status_code}, {len(response.content)} bytes")
            return parse_page(response.text)
        except (httpx.HTTPError, ValueError):
            self.failures += 1
            return None

    def open(self) -> None:
        self.first, self.first_at = self.read(), time.perf_counter()

    def start(self, clock: Callable[[], float]) -> None:
        self._thread = threading.Thread(target=self._run, args=(clock,), name="engine-watch", daemon=True)
        self._thread.start()

    def _run(self, clock: Callable[[], float]) -> None:
        began = time.thread_time()
        while not self._stop.is_set():
            page = self.read()
            if page is not None:
                self.samples.append(EngineSample(clock(), page.running, page.waiting))
            self._stop.wait(self.interval_s)
        self.cpu_s = time.thread_time() - began

    def close(self) -> None:
        """Stop sampling, then read the last page for the deltas."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=READ_TIMEOUT_S * 2)
        self.last, self.last_at = self.read(), time.perf_counter()
        if self._client is not None:
            self._client.close()
            self._client = None

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

    def generated(self) -> tuple[float, float] | None:
        """(tokens the engine generated, seconds between the two reads); None without the counter."""
        if self.first is None or self.last is None:
            return None
        before, after = self.first.generation_tokens, self.last.generation_tokens
        if before is None or after is None or after < before:
            return None
        return after - before, self.last_at - self.first_at


def observed(watch: EngineWatch | None, records: Sequence[RequestRecord]) -> tuple[EngineView, Throughput]:
    """What the engine showed of a step (nothing without a watch), and the step's throughput over the time
    its requests took with the engine's own token count beside it where the engine exports one."""
    throughput = delivered(records)
    if watch is None:
        return EngineView(), throughput
    generated = watch.generated()
    if generated is not None:
        throughput = replace(throughput, engine_tokens=generated[0], engine_span_s=generated[1])
    return EngineView(tuple(watch.samples), watch.ttft_buckets(), watch.ttft_mean_s()), throughput


def metrics_url(base_url: str) -> str:
    """Where an OpenAI-compatible vLLM serves its metrics: /metrics beside /v1."""
    return base_url.rstrip("/").removesuffix("/v1") + "/metrics"


def engine_version(base_url: str, timeout_s: float = 5.0) -> str:
    """The engine's version as its /version answers ({"version": "0.x"}); "unknown" when it cannot say."""
    try:
        answer = httpx.get(f"{base_url.rstrip('/')}/version", timeout=timeout_s, trust_env=False).json()
        return str(answer["version"]) if isinstance(answer, dict) and "version" in answer else "unknown"
    except (httpx.HTTPError, ValueError):
        return "unknown"
