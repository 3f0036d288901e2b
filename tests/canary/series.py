"""promtool input series of two revisions of one model, as the exporter will export them with `revision`.

A revision is one engine (one endpoint) of model `deepseek`: its TTFT, inter-token and end-to-end
histograms and its finished requests, each minute adding the counts of its phase. The TTFT layout is a
piece of vLLM's (0.1, 0.25, 0.5, 0.75, 1.0 s); its P99 is the linear interpolation promtool and
Prometheus compute, written out by each profile below.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.alerts.promtool import ENGINE, series
from tests.alerts.slo import counter

TTFT = "servescope_serving_time_to_first_token_seconds"
ITL = "servescope_serving_inter_token_latency_seconds"
E2E = "servescope_serving_e2e_request_latency_seconds"
FINISHED = "servescope_serving_requests_finished_total"
TTFT_BOUNDS = ("0.1", "0.25", "0.5", "0.75", "1.0", "+Inf")
ITL_BOUNDS = ("0.025", "0.05", "0.1", "+Inf")
TOKENS = 30  # output tokens, hence inter-token gaps, per request
STABLE = {**ENGINE, "endpoint": "http://10.0.0.1:8000/metrics", "revision": "stable1"}
CANARY = {**ENGINE, "endpoint": "http://10.0.0.9:8000/metrics", "revision": "canary2"}


@dataclass(frozen=True)
class Minute:
    """What a revision serves each minute: requests, cumulative TTFT counts per bound (TTFT_BOUNDS), how
    many take longer than the 60 s end-to-end bound, and how many end in abort."""

    requests: int
    ttft: tuple[int, ...]
    slow_e2e: int = 0
    aborted: int = 0

    def __post_init__(self) -> None:
        assert len(self.ttft) == len(TTFT_BOUNDS) and self.ttft[-1] == self.requests


# Stable, 900 requests a minute: P99 rank 891 of 900 lies in (0.25, 0.5]: 0.25 + 0.25 * 6/15 = 0.35 s.
STABLE_MINUTE = Minute(900, (600, 885, 900, 900, 900, 900))
# The same distribution at 100 a minute (a ninth, rounded): rank 99 in (0.25, 0.5]: 0.25 + 0.25 * 1/2.
EQUAL_MINUTE = Minute(100, (67, 98, 100, 100, 100, 100))
# Twice as slow: rank 99 in (0.5, 0.75]: 0.5 + 0.25 * 3/4 = 0.6875 s, 1.96x the stable's P99; 4% of its
# requests take longer than the 0.5 s bound (none of the stable's).
SLOW_MINUTE = Minute(100, (20, 60, 96, 100, 100, 100))


def scaled(minute: Minute, requests: int) -> Minute:
    """`minute`'s distribution at `requests` a minute (rounded down per bound)."""
    return Minute(
        requests,
        tuple(count * requests // minute.requests for count in minute.ttft),
        minute.slow_e2e * requests // minute.requests,
        minute.aborted * requests // minute.requests,
    )


def revision(labels: dict[str, str], phases: list[tuple[int, Minute]]) -> list[dict[str, str]]:
    """Every series of one revision, phase by phase: (minutes, what each minute serves)."""

    def grow(per_minute: list[int]) -> str:
        return counter([(steps, value) for (steps, _), value in zip(phases, per_minute, strict=True)])

    minutes = [minute for _, minute in phases]
    out = [
        series(f"{TTFT}_bucket", {**labels, "le": le}, grow([m.ttft[i] for m in minutes]))
        for i, le in enumerate(TTFT_BOUNDS)
    ]
    out.append(series(f"{TTFT}_count", labels, grow([m.requests for m in minutes])))
    # Inter-token gaps alike for every revision: half under 25 ms, all under 100 ms.
    tokens = [m.requests * TOKENS for m in minutes]
    for le, share in zip(ITL_BOUNDS, (0.5, 0.9, 1.0, 1.0), strict=True):
        out.append(series(f"{ITL}_bucket", {**labels, "le": le}, grow([int(t * share) for t in tokens])))
    out.append(series(f"{ITL}_count", labels, grow(tokens)))
    out += [
        series(f"{E2E}_bucket", {**labels, "le": "60.0"}, grow([m.requests - m.slow_e2e for m in minutes])),
        series(f"{E2E}_bucket", {**labels, "le": "+Inf"}, grow([m.requests for m in minutes])),
        series(f"{E2E}_count", labels, grow([m.requests for m in minutes])),
        series(
            FINISHED, {**labels, "finished_reason": "stop"}, grow([m.requests - m.aborted for m in minutes])
        ),
        series(FINISHED, {**labels, "finished_reason": "abort"}, grow([m.aborted for m in minutes])),
    ]
    return out
