"""Replay production: the arrival-rate curve and length histograms of a range, read from Prometheus.

The curve is the rate of vLLM's finished-request counter over the range; the lengths come from its
`vllm:request_prompt_tokens` / `vllm:request_generation_tokens` histograms, increased over the same
range. Replayed `compress` times faster (a day in minutes), each curve segment becomes Poisson arrivals
at its rate (times `rate_scale`), and each request draws its lengths from the histograms, uniform
within the drawn bucket.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from servescope.core.errors import ServescopeError
from servescope.kit.load.schedule import MAX_REQUESTS, Shape, ShapeList, arrival_times

REQUESTS = "vllm:request_success_total"
PROMPT_LENGTHS = "vllm:request_prompt_tokens_bucket"
OUTPUT_LENGTHS = "vllm:request_generation_tokens_bucket"
MAX_POINTS = 11_000  # Prometheus's own limit on the points of one range query
REPLAY_SHAPES = 4096
Buckets = tuple[tuple[float, float], ...]  # cumulative (upper bound, count)


class ReplayError(ServescopeError):
    """Prometheus could not answer, or holds no traffic in the range; the message says which."""

    reason = "replay_failed"


@dataclass(frozen=True)
class Profile:
    """A traffic shape: (seconds from the range's start, req/s) per step, and the length histograms."""

    step_s: float
    curve: tuple[tuple[float, float], ...]
    prompt_buckets: Buckets
    output_buckets: Buckets

    @property
    def duration_s(self) -> float:
        return len(self.curve) * self.step_s


class PrometheusApi:
    """The two queries a replay needs, against the Prometheus HTTP API at `base_url`."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        try:
            response = httpx.get(
                f"{self.base_url}{path}", params=params, timeout=self.timeout_s, trust_env=False
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ReplayError(f"{self.base_url}{path}: {exc}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else body
            raise ReplayError(f"{self.base_url}{path} {params.get('query', '')[:80]!r}: {error}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def range(self, expr: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": str(start), "end": str(end), "step": str(step_s)}
        return self._get("/api/v1/query_range", params)

    def instant(self, expr: str, at: float) -> list[dict[str, Any]]:
        return self._get("/api/v1/query", {"query": expr, "time": str(at)})


def _matchers(selector: str) -> str:
    return f"{{{selector}}}" if selector else ""


def _buckets(api: PrometheusApi, name: str, selector: str, start: float, end: float) -> Buckets:
    window = f"{max(1, round(end - start))}s"
    result = api.instant(f"sum by (le) (increase({name}{_matchers(selector)}[{window}]))", end)
    found = sorted((float(item["metric"]["le"]), float(item["value"][1])) for item in result)
    if not found or found[-1][1] <= 0:
        raise ReplayError(f"{name}{_matchers(selector)}: no requests between {start:.0f} and {end:.0f}")
    return tuple(found)


def read_profile(
    api: PrometheusApi, start: float, end: float, step_s: float = 60.0, selector: str = ""
) -> Profile:
    """The traffic of [start, end] (unix seconds) on the engines `selector` picks (PromQL matchers)."""
    if step_s <= 0 or end - start < step_s:
        raise ReplayError(
            f"range {start}..{end} step {step_s}: the range must hold at least one positive step"
        )
    if (end - start) / step_s > MAX_POINTS:
        raise ReplayError(f"range {end - start:.0f} s at step {step_s} s exceeds {MAX_POINTS} points")
    window = f"{max(2 * step_s, 60.0):.0f}s"  # at least two scrapes of a 30 s interval in every window
    series = api.range(f"sum(rate({REQUESTS}{_matchers(selector)}[{window}]))", start + step_s, end, step_s)
    if not series:
        raise ReplayError(f"{REQUESTS}{_matchers(selector)}: no series between {start:.0f} and {end:.0f}")
    curve = tuple((float(t) - start - step_s, max(0.0, float(v))) for t, v in series[0]["values"])
    return Profile(
        step_s,
        curve,
        _buckets(api, PROMPT_LENGTHS, selector, start, end),
        _buckets(api, OUTPUT_LENGTHS, selector, start, end),
    )


def replay_schedule(
    profile: Profile, *, compress: float, rate_scale: float, seed: int
) -> tuple[list[float], float]:
    """Send times of the compressed replay, and its duration: Poisson within each curve segment."""
    if compress <= 0 or rate_scale <= 0:
        raise ValueError(f"compress {compress} and rate scale {rate_scale} must be positive")
    segment = profile.step_s / compress
    times: list[float] = []
    for index, (_, rate) in enumerate(profile.curve):
        scaled = rate * rate_scale
        if scaled * segment < 1e-9:
            continue
        offset = index * segment
        times.extend(offset + t for t in arrival_times(scaled, segment, arrival="poisson", seed=seed + index))
        if len(times) > MAX_REQUESTS:
            raise ValueError(f"the replay exceeds {MAX_REQUESTS} requests: raise compress or lower the scale")
    return times, len(profile.curve) * segment


def draw_lengths(buckets: Sequence[tuple[float, float]], count: int, rng: random.Random) -> list[int]:
    """Lengths drawn from a cumulative histogram, uniform within the bucket (the +Inf one: its floor)."""
    edges = [(0.0, 0.0), *sorted(buckets)]
    weights = [max(0.0, upper[1] - lower[1]) for lower, upper in itertools.pairwise(edges)]
    lengths = []
    for index in rng.choices(range(len(weights)), weights=weights, k=count):
        low = math.floor(edges[index][0]) + 1
        high = edges[index + 1][0]
        lengths.append(low if math.isinf(high) else rng.randint(low, max(low, math.floor(high))))
    return lengths


def replay_shapes(profile: Profile, seed: int) -> ShapeList:
    """Request shapes whose lengths follow the profile's histograms (prompt and output drawn apart)."""
    rng = random.Random(seed)
    prompts = draw_lengths(profile.prompt_buckets, REPLAY_SHAPES, rng)
    outputs = draw_lengths(profile.output_buckets, REPLAY_SHAPES, rng)
    return ShapeList(tuple(Shape(p, o) for p, o in zip(prompts, outputs, strict=True)))
