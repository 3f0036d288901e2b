"""`servescope load`'s own Prometheus metrics, so a run can be watched on the "Load test" dashboard."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)

from servescope.kit.load.records import LoopMode, RequestRecord, StepResult, achieved_rate

# Client latency buckets: fine below a second (where a P99 SLO of 500 ms sits), coarse above.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    1.5,
    2.5,
    5.0,
)
LATENCY_BUCKETS += (10.0, 30.0)
PREFIX = "servescope_load_"


class LoadMetrics:
    """The client's view: offered and achieved rate, in-flight, TTFT/e2e histograms, errors by reason."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.offered = Gauge(
            f"{PREFIX}offered_rate",
            "Offered load of the step (req/s; clients if closed loop)",
            ["mode"],
            registry=r,
        )
        self.achieved = Gauge(
            f"{PREFIX}achieved_rate",
            "Requests sent per second in the last finished step",
            ["mode"],
            registry=r,
        )
        self.valid = Gauge(f"{PREFIX}step_valid", "1 if the last finished step was valid, else 0", registry=r)
        self.in_flight = Gauge(f"{PREFIX}in_flight", "Requests sent and not yet answered", registry=r)
        self.requests = Counter(f"{PREFIX}requests", "Requests finished, by outcome", ["outcome"], registry=r)
        self.errors = Counter(f"{PREFIX}errors", "Failed requests by reason", ["reason"], registry=r)
        self.output_tokens = Counter(f"{PREFIX}output_tokens", "Output tokens received", registry=r)
        self.ttft = self._latency("ttft_seconds", "Client TTFT from the scheduled send")
        self.e2e = self._latency("e2e_seconds", "Client end-to-end latency from the scheduled send")
        self.lag = self._latency("schedule_lag_seconds", "How late each send went out against the schedule")
        self.mode: LoopMode = "open"

    def _latency(self, name: str, text: str) -> Histogram:
        return Histogram(f"{PREFIX}{name}", text, registry=self.registry, buckets=LATENCY_BUCKETS)

    def step_started(self, mode: LoopMode, offered: float) -> None:
        self.mode = mode
        self.offered.clear()
        self.offered.labels(mode).set(offered)

    def sent(self, lag_s: float) -> None:
        self.in_flight.inc()
        self.lag.observe(max(0.0, lag_s))

    def finished(self, record: RequestRecord) -> None:
        if record.sent_s is not None:
            self.in_flight.dec()
        if record.error is not None:
            self.errors.labels(record.error).inc()
            self.requests.labels("error").inc()
            return
        self.requests.labels("ok").inc()
        self.output_tokens.inc(record.output_tokens)
        if record.ttft_s is not None:
            self.ttft.observe(record.ttft_s)
        if record.e2e_s is not None:
            self.e2e.observe(record.e2e_s)

    def step_finished(self, result: StepResult) -> None:
        self.achieved.clear()
        self.achieved.labels(result.mode).set(achieved_rate(result.records, result.duration_s))
        self.valid.set(1 if result.valid else 0)


def serve_metrics(metrics: LoadMetrics, port: int, host: str = "127.0.0.1") -> None:
    """Expose the metrics on http://host:port/metrics from a background thread."""
    # This process exposes only these metrics: no *_created series per family.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    start_http_server(port, addr=host, registry=metrics.registry)


def metric_names() -> set[str]:
    """Every series name these metrics expose (the dashboard's queries are checked against it)."""
    names: set[str] = set()
    for family in LoadMetrics().registry.collect():
        suffixes = ("_bucket", "_sum", "_count") if family.type == "histogram" else ("",)
        base = f"{family.name}_total" if family.type == "counter" else family.name
        names.update(base + suffix for suffix in suffixes)
    return names
