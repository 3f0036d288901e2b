"""A step's summary: rates, percentiles from the scheduled and the actual send, errors, the engine's view."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servescope.kit.load.records import RequestRecord, StepResult, Throughput, achieved_rate, delivered
from servescope.kit.load.validity import bucket_bounds, percentile

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _quantiles(values: Sequence[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    return {name: percentile(present, q) for name, q in QUANTILES.items()}


@dataclass(frozen=True)
class TtftAgreement:
    """The client's P99 TTFT from the send beside the engine histogram's P99 bucket."""

    client_p99_s: float
    bucket: tuple[float, float]
    slack_s: float  # the client's own measured delay (schedule lag p99), allowed above the bucket
    path_s: float = 0.0  # mean client TTFT minus the engine's mean: the HTTP and API-server path

    @property
    def agrees(self) -> bool:
        """Never below the engine's bucket; above it by no more than the measured path and lag."""
        return self.bucket[0] <= self.client_p99_s <= self.bucket[1] + self.path_s + self.slack_s


def path_seconds(client_ttfts: list[float], engine_mean_s: float | None) -> float:
    """How much longer the client's mean TTFT is than the engine's: the path the engine's clock omits."""
    if engine_mean_s is None or not client_ttfts:
        return 0.0
    return max(0.0, sum(client_ttfts) / len(client_ttfts) - engine_mean_s)


def ttft_agreement(result: StepResult) -> TtftAgreement | None:
    """Compare the client's P99 TTFT with the engine's over the same step; None without both."""
    bucket = bucket_bounds(result.engine_ttft_buckets, 0.99)
    ttfts = [r.service_ttft_s for r in result.records if r.ok and r.service_ttft_s]
    client = percentile(ttfts, 0.99)
    if bucket is None or client is None:
        return None
    path = path_seconds(ttfts, result.engine_ttft_mean_s)
    return TtftAgreement(client, bucket, result.schedule_lag_p99_s, path)


def mode_label(result: StepResult) -> str:
    if result.mode == "closed":
        return f"CLOSED LOOP, {result.offered:g} concurrent clients (hides queueing: coordinated omission)"
    return f"open loop, {result.offered:g} req/s offered"


def throughput_of(result: StepResult) -> Throughput:
    """The step's throughput over the time its requests took (the runner's, or from its records)."""
    return result.throughput or delivered(result.records)


def summarise(result: StepResult) -> dict[str, Any]:
    """Everything a report needs about one step, JSON-ready."""
    ok: list[RequestRecord] = [r for r in result.records if r.ok]
    errors = Counter(r.error for r in result.records if r.error is not None)
    agreement = ttft_agreement(result)
    delivered_now = throughput_of(result)
    cost = result.client
    return {
        "mode": result.mode,
        "label": mode_label(result),
        "status": result.status,
        "valid": result.valid,
        "invalid_reason": result.invalid_reason,
        "offered": result.offered,
        "duration_s": result.duration_s,
        "warmup_s": result.warmup_s,
        "achieved_rate": achieved_rate(result.records, result.duration_s),
        "requests": len(result.records),
        "succeeded": len(ok),
        "errors": dict(sorted(errors.items())),
        "span_s": delivered_now.span_s,
        "output_tokens_per_s": delivered_now.tokens_per_s,
        "requests_per_s": delivered_now.requests_per_s,
        "engine_output_tokens_per_s": delivered_now.engine_tokens_per_s,
        "client_cpu_per_request_ms": cost.cpu_per_request_ms if cost else None,
        "client_busy": cost.busy if cost else None,
        "cpu_pressure": cost.cpu_pressure if cost else None,
        "ttft_s": _quantiles([r.ttft_s for r in ok]),
        "service_ttft_s": _quantiles([r.service_ttft_s for r in ok]),
        "e2e_s": _quantiles([r.e2e_s for r in ok]),
        "tpot_s": _quantiles([r.tpot_s for r in ok]),
        "itl_s": _quantiles([gap for r in ok for gap in r.chunk_gaps]),
        "schedule_lag_p99_s": result.schedule_lag_p99_s,
        "engine_ttft_p99_bucket_s": list(agreement.bucket) if agreement else None,
        "engine_ttft_agrees": agreement.agrees if agreement else None,
        "engine_ttft_path_s": agreement.path_s if agreement else None,
        "engine_waiting_max": max((s.waiting for s in result.engine_samples), default=None),
        "engine_running_max": max((s.running for s in result.engine_samples), default=None),
        "notes": list(result.notes),
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


HEADS = {
    "valid": "VALID",
    "client_bound": "CLIENT_BOUND (not a result: the client could not drive it)",
    "overloaded": "OVERLOADED (above capacity: the engine's backlog grew)",
    "engine_failed": "ENGINE_FAILED (most requests failed)",
}


def _engine_rate(summary: dict[str, Any]) -> str:
    engine = summary["engine_output_tokens_per_s"]
    return "" if engine is None else f" (the engine counted {engine:.1f})"


def render_text(summary: dict[str, Any]) -> str:
    """The summary for a terminal; a step that is not a result says so first, with the side at fault."""
    head = HEADS[summary["status"]]
    if summary["invalid_reason"]:
        head += f": {summary['invalid_reason']}"
    cost = summary["client_cpu_per_request_ms"]
    lines = [
        f"{summary['label']}: {head}",
        f"  achieved {summary['achieved_rate']:.2f} req/s over {summary['duration_s']:g} s; "
        f"{summary['succeeded']}/{summary['requests']} succeeded; errors {summary['errors'] or 'none'}",
        f"  output {summary['output_tokens_per_s']:.1f} tokens/s over the {summary['span_s']:.1f} s the "
        f"requests took{_engine_rate(summary)}; schedule lag p99 {_ms(summary['schedule_lag_p99_s'])}",
    ]
    if cost is not None:
        lines.append(
            f"  client CPU {cost:.2f} ms per request ({summary['client_busy']:.0%} of a core); CPU "
            f"pressure {summary['cpu_pressure']:.0f} %"
        )
    for key, title in (
        ("ttft_s", "TTFT (from schedule)"),
        ("service_ttft_s", "TTFT (from send)"),
        ("e2e_s", "e2e (from schedule)"),
        ("tpot_s", "TPOT (per request)"),
        ("itl_s", "ITL (per chunk)"),
    ):
        q = summary[key]
        lines.append(f"  {title:22} p50 {_ms(q['p50'])}  p90 {_ms(q['p90'])}  p99 {_ms(q['p99'])}")
    bucket = summary["engine_ttft_p99_bucket_s"]
    if bucket:
        agrees = "agrees with" if summary["engine_ttft_agrees"] else "DISAGREES with"
        lines.append(
            f"  client TTFT p99 (from send) {agrees} the engine's p99 bucket "
            f"({_ms(bucket[0])}, {_ms(bucket[1])}] "
            f"(+ path {_ms(summary['engine_ttft_path_s'])} + lag slack); "
            f"waiting max {summary['engine_waiting_max']}"
        )
    lines.extend(f"  note: {note}" for note in summary["notes"])
    return "\n".join(lines)
