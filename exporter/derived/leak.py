"""Leak verdict: memory grows steadily while serving load and KV usage stay flat."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .trend import theil_sen_slope

MIB = 1024 * 1024


@dataclass(frozen=True)
class LeakThresholds:
    """Thresholds for a leak verdict over one window (meant for ~30 min)."""

    # 1 MiB/min is ~1.4 GiB/day: small enough to catch the slow growth that ends in an OOM days later,
    # large enough to sit above the drift of caching allocators at steady state.
    min_slope_bytes_per_s: float = MIB / 60
    # Growth must also be visible in absolute terms, so a short window of noise cannot pass.
    min_growth_bytes: float = 32 * MIB
    # A leak grows at the same rate all the time; warm-up grows fast then stops. Both halves of the
    # window must grow, and their rates may differ by at most this factor.
    max_half_ratio: float = 3.0
    # Load and KV usage may change by at most this fraction of their mean over the window; more means
    # the memory growth is explained by traffic (a ramp), not by a leak.
    max_load_change: float = 0.10
    max_kv_change: float = 0.10


@dataclass(frozen=True)
class LeakVerdict:
    """Whether a leak is suspected, and the reason in one line for humans."""

    suspected: bool
    reason: str


def leak_suspected(
    memory_slope_bytes_per_s: float,
    memory_window_growth_bytes: float,
    load_slope_relative: float | None,
    kv_slope_relative: float | None,
    *,
    first_half_slope: float,
    second_half_slope: float,
    thresholds: LeakThresholds = LeakThresholds(),
) -> LeakVerdict:
    """Decide from precomputed slopes; relative slopes are fractional changes over the window."""
    th = thresholds
    if memory_slope_bytes_per_s < th.min_slope_bytes_per_s:
        return LeakVerdict(False, f"memory slope {memory_slope_bytes_per_s * 60 / MIB:.2f} MiB/min too low")
    if memory_window_growth_bytes < th.min_growth_bytes:
        return LeakVerdict(False, f"memory grew only {memory_window_growth_bytes / MIB:.1f} MiB")
    if first_half_slope <= 0 or second_half_slope <= 0:
        return LeakVerdict(False, "memory growth not sustained over both halves of the window")
    ratio = max(first_half_slope, second_half_slope) / min(first_half_slope, second_half_slope)
    if ratio > th.max_half_ratio:
        return LeakVerdict(False, f"growth rate changed {ratio:.1f}x between halves (warm-up?)")
    if load_slope_relative is not None and abs(load_slope_relative) > th.max_load_change:
        return LeakVerdict(False, f"serving load changed {load_slope_relative:+.0%}: growth follows traffic")
    if kv_slope_relative is not None and abs(kv_slope_relative) > th.max_kv_change:
        return LeakVerdict(False, f"KV usage changed {kv_slope_relative:+.0%}: growth follows KV cache")
    unknown = [name for name, v in (("load", load_slope_relative), ("KV", kv_slope_relative)) if v is None]
    note = f" ({' and '.join(unknown)} unknown)" if unknown else ""
    rate = memory_slope_bytes_per_s * 60 / MIB
    return LeakVerdict(True, f"memory grows steadily at {rate:.1f} MiB/min with flat load{note}")


def relative_change(times: Sequence[float], values: Sequence[float]) -> float | None:
    """Trend change over the window as a fraction of the mean level; None when undefined."""
    slope = theil_sen_slope(times, values)
    if slope is None or not values:
        return None
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0 if slope == 0 else None
    return slope * (times[-1] - times[0]) / abs(mean)


def assess_leak(
    times: Sequence[float],
    memory: Sequence[float],
    load: Sequence[float] | None = None,
    kv_usage: Sequence[float] | None = None,
    thresholds: LeakThresholds = LeakThresholds(),
) -> LeakVerdict:
    """Leak verdict from raw series sampled at the same times (load and KV optional)."""
    if len(times) < 4:
        return LeakVerdict(False, f"only {len(times)} samples")
    half = len(times) // 2
    slope = theil_sen_slope(times, memory)
    first = theil_sen_slope(times[:half], memory[:half])
    second = theil_sen_slope(times[half:], memory[half:])
    if slope is None or first is None or second is None:
        return LeakVerdict(False, "timestamps do not span any time")
    return leak_suspected(
        slope,
        slope * (times[-1] - times[0]),
        relative_change(times, load) if load is not None else None,
        relative_change(times, kv_usage) if kv_usage is not None else None,
        first_half_slope=first,
        second_half_slope=second,
        thresholds=thresholds,
    )
