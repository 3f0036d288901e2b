"""Leak verdict: memory grows steadily while serving load and KV usage stay flat."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from servescope.exporter.derived.trend import ROBUST_POINTS, robust_slope

MIB = 1024 * 1024

Series = tuple[Sequence[float], Sequence[float]]  # (times, values), oldest first
MIN_HALF_SAMPLES = 8


@dataclass(frozen=True)
class LeakThresholds:
    """Thresholds for a leak verdict over one window (meant for 4-30 min)."""

    # 1 MiB/min is ~1.4 GiB/day: small enough to catch the slow growth that ends in an OOM days later,
    # large enough to sit above the drift of caching allocators at steady state.
    min_slope_bytes_per_s: float = MIB / 60
    # Growth must also be visible in absolute terms, so a short window of noise cannot pass.
    min_growth_bytes: float = 32 * MIB
    # A leak grows at the same rate all the time; warm-up grows fast then stops. Both halves of the
    # window must grow, and their rates may differ by at most this factor.
    max_half_ratio: float = 3.0
    # Mean load of the second half vs the first, as a fraction of the mean: more than this means the
    # memory growth follows traffic (a ramp), not a leak. 20% sits above the sampling noise of a few
    # requests per second over 2 minutes (~7%) and below the change of any ramp that moves memory.
    max_load_change: float = 0.20
    # KV usage is already a fraction of the cache, and often near 0: compared in absolute points.
    max_kv_change: float = 0.05
    # The growth must also exceed the memory's own swing around its trend (the p10-p90 spread of the
    # residuals: an allocator's sawtooth, noise). Over a few minutes, a sawtooth cut at an awkward
    # phase fits a slope of tens of MiB/min; a real leak soon outgrows the sawtooth, a phase never does.
    min_growth_to_swing: float = 1.0


@dataclass(frozen=True)
class LeakVerdict:
    """Whether a leak is suspected, and the reason in one line for humans."""

    suspected: bool
    reason: str


def leak_suspected(
    memory_slope_bytes_per_s: float,
    memory_window_growth_bytes: float,
    load_change_relative: float | None,
    kv_change_absolute: float | None,
    *,
    first_half_slope: float,
    second_half_slope: float,
    swing_bytes: float = 0.0,
    thresholds: LeakThresholds = LeakThresholds(),
) -> LeakVerdict:
    """Decide from precomputed slopes and load/KV changes between the window's halves."""
    th = thresholds
    if memory_slope_bytes_per_s < th.min_slope_bytes_per_s:
        return LeakVerdict(False, f"memory slope {memory_slope_bytes_per_s * 60 / MIB:.2f} MiB/min too low")
    if memory_window_growth_bytes < th.min_growth_bytes:
        return LeakVerdict(False, f"memory grew only {memory_window_growth_bytes / MIB:.1f} MiB")
    if memory_window_growth_bytes < th.min_growth_to_swing * swing_bytes:
        return LeakVerdict(
            False,
            f"memory grew {memory_window_growth_bytes / MIB:.1f} MiB, within its own swing of "
            f"{swing_bytes / MIB:.1f} MiB (sawtooth, noise)",
        )
    if first_half_slope <= 0 or second_half_slope <= 0:
        return LeakVerdict(False, "memory growth not sustained over both halves of the window")
    ratio = max(first_half_slope, second_half_slope) / min(first_half_slope, second_half_slope)
    if ratio > th.max_half_ratio:
        return LeakVerdict(False, f"growth rate changed {ratio:.1f}x between halves (warm-up?)")
    if load_change_relative is not None and abs(load_change_relative) > th.max_load_change:
        return LeakVerdict(False, f"serving load changed {load_change_relative:+.0%}: growth follows traffic")
    if kv_change_absolute is not None and abs(kv_change_absolute) > th.max_kv_change:
        return LeakVerdict(
            False, f"KV usage changed {kv_change_absolute * 100:+.1f} points: growth follows the KV cache"
        )
    unknown = [name for name, v in (("load", load_change_relative), ("KV", kv_change_absolute)) if v is None]
    note = f" ({' and '.join(unknown)} unknown)" if unknown else ""
    rate = memory_slope_bytes_per_s * 60 / MIB
    return LeakVerdict(True, f"memory grows steadily at {rate:.1f} MiB/min with flat load{note}")


def _halves(series: Series) -> tuple[list[float], list[float]] | None:
    """The values before and from the middle time; None for fewer than 4 samples, no span or an empty half."""
    times, values = series
    if len(times) < 4 or times[-1] <= times[0]:
        return None
    middle = (times[0] + times[-1]) / 2
    first = [v for t, v in zip(times, values, strict=True) if t < middle]
    second = [v for t, v in zip(times, values, strict=True) if t >= middle]
    return (first, second) if first and second else None


def _half_means(series: Series) -> tuple[float, float, float] | None:
    """Means of the first half, the second half (split at the middle time) and the whole series."""
    halves = _halves(series)
    if halves is None:
        return None
    first, second = halves
    values = series[1]
    return sum(first) / len(first), sum(second) / len(second), sum(values) / len(values)


def half_change_relative(series: Series) -> float | None:
    """(second-half mean - first-half mean) / overall mean; None when undefined."""
    means = _half_means(series)
    if means is None:
        return None
    first, second, mean = means
    if mean == 0:
        return 0.0 if first == second else None
    return (second - first) / abs(mean)


def half_change_stderr(series: Series) -> float | None:
    """The standard error of half_change_relative (both halves' sample variances); None when undefined
    or when a half holds fewer than MIN_HALF_SAMPLES samples, whose variance is itself too noisy to use."""
    halves = _halves(series)
    if halves is None or min(len(h) for h in halves) < MIN_HALF_SAMPLES:
        return None
    values = series[1]
    mean = sum(values) / len(values)
    if mean == 0:
        return None
    variance = sum(statistics.variance(h) / len(h) for h in halves)
    return math.sqrt(variance) / abs(mean)


def half_change_absolute(series: Series) -> float | None:
    """Second-half mean minus first-half mean, in the series' own unit."""
    means = _half_means(series)
    return None if means is None else means[1] - means[0]


def assess_leak(
    times: Sequence[float],
    memory: Sequence[float],
    load: Series | None = None,
    kv_usage: Series | None = None,
    thresholds: LeakThresholds = LeakThresholds(),
) -> LeakVerdict:
    """Leak verdict from memory samples and optional load and KV series over the same window.

    Load and KV have their own timestamps (they come from scrapes every few seconds, memory from NVML
    every second); only the means of their halves are compared, so the sampling need not line up.
    """
    if len(times) < 8:
        return LeakVerdict(False, f"only {len(times)} samples")
    half = len(times) // 2
    slope = robust_slope(times, memory)
    first = robust_slope(times[:half], memory[:half], points=ROBUST_POINTS // 2)
    second = robust_slope(times[half:], memory[half:], points=ROBUST_POINTS // 2)
    if slope is None or first is None or second is None:
        return LeakVerdict(False, "timestamps do not span any time")
    return leak_suspected(
        slope,
        slope * (times[-1] - times[0]),
        half_change_relative(load) if load is not None else None,
        half_change_absolute(kv_usage) if kv_usage is not None else None,
        first_half_slope=first,
        second_half_slope=second,
        swing_bytes=swing(times, memory, slope),
        thresholds=thresholds,
    )


def swing(times: Sequence[float], values: Sequence[float], slope: float) -> float:
    """The p10-p90 spread of the values around a line of `slope` (the trend taken out)."""
    detrended = sorted(v - slope * t for t, v in zip(times, values, strict=True))
    if len(detrended) < 2:
        return 0.0
    last = len(detrended) - 1
    return detrended[round(0.9 * last)] - detrended[round(0.1 * last)]
