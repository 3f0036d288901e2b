"""Memory ring, Theil-Sen trend, exhaustion time and leak verdict on synthetic GPU memory curves."""

from __future__ import annotations

import math
import random

import pytest

from servescope.exporter.derived.leak import LeakThresholds, assess_leak, leak_suspected
from servescope.exporter.derived.memory_signals import load_rose, trend_report
from servescope.exporter.derived.source import _most_moving
from servescope.exporter.derived.trend import (
    ROBUST_POINTS,
    bucket_medians,
    robust_slope,
    seconds_to_exhaustion,
    theil_sen_slope,
)
from servescope.exporter.stores.ring import BYTES_PER_SAMPLE, MemoryRing

MIB = 1024**2
GIB = 1024**3
LEAK_BYTES_PER_S = 40 * MIB / 60


def _ols_slope(times: list[float], values: list[float]) -> float:
    mean_t = sum(times) / len(times)
    mean_v = sum(values) / len(values)
    num = sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True))
    return num / sum((t - mean_t) ** 2 for t in times)


def _leaky_memory(
    seconds: int, start: float, *, period: int = 600, hold: int = 150, offset: int = 450, seed: int = 7
) -> tuple[list[float], list[float]]:
    """40 MiB/min leak plus a 512 MiB allocator sawtooth (held then freed) plus noise."""
    rng = random.Random(seed)
    times = [float(t) for t in range(seconds)]
    values = [
        start
        + LEAK_BYTES_PER_S * t
        + (512 * MIB if (t + offset) % period >= period - hold else 0)
        + rng.gauss(0, 8 * MIB)
        for t in times
    ]
    return times, values


def test_ring_capacity_bounded_over_three_hours() -> None:
    ring = MemoryRing(capacity_seconds=3600, resolution=1.0)
    size = ring.nbytes()
    assert size == 3600 * BYTES_PER_SAMPLE
    for t in range(3 * 3600):
        ring.append(float(t), float(t))
    assert len(ring) == 3600
    assert ring.nbytes() == size
    times, values = ring.window(7200, now=3 * 3600)
    assert len(times) == 3600
    assert times[0] == 3 * 3600 - 3600
    assert times[-1] == values[-1] == 3 * 3600 - 1
    assert ring.latest() == (3 * 3600 - 1, 3 * 3600 - 1)


def test_ring_peak_catches_short_spike_in_window() -> None:
    ring = MemoryRing(capacity_seconds=600)
    for t in range(300):
        spike = 30 * GIB if 280 <= t < 282 else 0
        ring.append(float(t), 70 * GIB + spike)
    assert ring.peak(30, now=299) == 100 * GIB
    assert ring.minimum(30, now=299) == 70 * GIB
    assert ring.peak(10, now=299) == 70 * GIB


def test_ring_drops_out_of_order_and_merges_fast_samples() -> None:
    ring = MemoryRing(capacity_seconds=60)
    assert ring.latest() is None
    assert ring.peak(30, now=0) is None
    assert ring.append(10.0, 1.0)
    assert not ring.append(9.0, 5.0)
    assert not ring.append(10.0, 5.0)
    assert ring.append(10.2, 7.0)  # faster than the resolution: merged, keeping the max
    assert len(ring) == 1
    assert ring.latest() == (10.0, 7.0)
    with pytest.raises(ValueError, match="capacity_seconds"):
        MemoryRing(capacity_seconds=0)


def test_theil_sen_recovers_leak_under_sawtooth_where_ols_fails() -> None:
    times, values = _leaky_memory(1800, start=100 * GIB)
    slope = theil_sen_slope(times, values)
    assert slope is not None
    assert slope == pytest.approx(LEAK_BYTES_PER_S, rel=0.05)
    assert abs(_ols_slope(times, values) / LEAK_BYTES_PER_S - 1) > 0.10


def test_theil_sen_degenerate_inputs() -> None:
    assert theil_sen_slope([], []) is None
    assert theil_sen_slope([1.0], [2.0]) is None
    assert theil_sen_slope([0.0, 1.0, 2.0], [0.0, 2.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="differ in length"):
        theil_sen_slope([0.0, 1.0], [1.0])


def test_time_to_exhaustion_after_five_minutes() -> None:
    total = 141 * GIB
    start = 0.9 * total
    times, values = _leaky_memory(300, start=start, period=120, hold=40, offset=80)
    slope = theil_sen_slope(times, values)
    estimate = seconds_to_exhaustion(values[-1], total, slope)
    truth = (total - (start + LEAK_BYTES_PER_S * times[-1])) / LEAK_BYTES_PER_S
    assert estimate == pytest.approx(truth, rel=0.20)


def test_exhaustion_edge_cases() -> None:
    assert seconds_to_exhaustion(10.0, 10.0, 1.0) == 0.0
    assert seconds_to_exhaustion(5.0, 10.0, 0.0) == math.inf
    assert seconds_to_exhaustion(5.0, 10.0, None) == math.inf
    assert seconds_to_exhaustion(5.0, 10.0, 1.0) == 5.0


def _flat(n: int, level: float, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(n)]


def test_leak_verdict_true_for_steady_leak_with_flat_load() -> None:
    times, memory = _leaky_memory(1800, start=80 * GIB)
    verdict = assess_leak(
        times, memory, (times, _flat(1800, 5000, 0.05, 1)), (times, _flat(1800, 0.5, 0.04, 2))
    )
    assert verdict.suspected, verdict.reason
    assert "MiB/min" in verdict.reason


def test_leak_verdict_false_for_traffic_ramp() -> None:
    times = [float(t) for t in range(1800)]
    load = [1000 + 4000 * t / 1800 for t in times]
    kv = [0.1 + 0.5 * t / 1800 for t in times]
    memory = [60 * GIB + k * 20 * GIB for k in kv]
    verdict = assess_leak(times, memory, (times, load), (times, kv))
    assert not verdict.suspected
    assert "load" in verdict.reason
    # Without the load, the KV cache alone explains the growth.
    verdict = assess_leak(times, memory, None, (times, kv))
    assert not verdict.suspected
    assert "KV usage" in verdict.reason


def test_leak_verdict_false_for_steady_noisy_load() -> None:
    times = [float(t) for t in range(1800)]
    memory = _flat(1800, 70 * GIB, 0.001, 3)
    verdict = assess_leak(
        times, memory, (times, _flat(1800, 5000, 0.2, 4)), (times, _flat(1800, 0.6, 0.1, 5))
    )
    assert not verdict.suspected


def test_leak_verdict_false_for_warm_up() -> None:
    times = [float(t) for t in range(1800)]
    memory = [60 * GIB + min(t, 300.0) * 10 * MIB for t in times]
    verdict = assess_leak(times, memory)
    assert not verdict.suspected


def test_leak_verdict_with_load_sampled_on_its_own_clock() -> None:
    # Memory every second, tokens/s every 5 s from scrapes: only the halves' means are compared.
    # 15 minutes: the 40 MiB/min leak (600 MiB) has outgrown the 512 MiB allocator pulses.
    times, memory = _leaky_memory(900, start=80 * GIB, period=120, hold=40, offset=80)
    load_times = [float(t) for t in range(0, 900, 5)]
    assert assess_leak(times, memory, (load_times, _flat(180, 4000, 0.25, 9))).suspected
    ramp = [2000 + 4000 * t / 900 for t in load_times]
    assert not assess_leak(times, memory, (load_times, ramp)).suspected


def test_bucket_medians_and_robust_slope() -> None:
    times = [float(t) for t in range(100)]
    values = [2.0 * t + (1000.0 if t % 10 == 3 else 0.0) for t in times]  # a 1-sample outlier per bucket
    bt, bv = bucket_medians(times, values, 10.0)
    assert len(bt) == len(bv) == 10
    assert bt[0] == pytest.approx(4.5)
    assert bv[0] == pytest.approx(11.0)  # the 1006 outlier moves the median by one rank only
    assert robust_slope(times, values) == pytest.approx(2.0)
    assert robust_slope([1.0], [1.0]) is None
    assert robust_slope([1.0, 1.0], [1.0, 2.0]) is None
    with pytest.raises(ValueError, match="bucket_seconds"):
        bucket_medians(times, values, 0)


def test_leak_verdict_notes_unknown_load() -> None:
    verdict = leak_suspected(
        LEAK_BYTES_PER_S,
        1200 * MIB,
        None,
        0.01,
        first_half_slope=LEAK_BYTES_PER_S,
        second_half_slope=LEAK_BYTES_PER_S * 1.2,
        thresholds=LeakThresholds(),
    )
    assert verdict.suspected
    assert "load unknown" in verdict.reason


def _sawtooth(
    rate: float, seconds: int, phase: float, *, height: float = 512 * MIB, period: float = 90.0
) -> tuple[list[float], list[float]]:
    rng = random.Random(int(phase))
    times = [float(t) for t in range(seconds)]
    values = [
        60 * GIB + rate * t + height * (((t + phase) / period) % 1.0) + rng.gauss(0, 8 * MIB) for t in times
    ]
    return times, values


@pytest.mark.parametrize(("seconds", "phase"), [(360, 0), (360, 5), (360, 80), (360, 85), (420, 15)])
def test_a_sawtooth_cut_at_an_awkward_phase_is_within_its_swing_not_a_leak(
    seconds: int, phase: float
) -> None:
    # A flat 512 MiB / 90 s allocator sawtooth: over 6-7 minutes, cut at these phases, the bucket
    # medians fit 14-33 MiB/min of "growth", all of it phase.
    times, values = _sawtooth(0.0, seconds, phase)
    bucket = (times[-1] - times[0]) / ROBUST_POINTS
    without = assess_leak(
        *bucket_medians(times, values, bucket), thresholds=LeakThresholds(min_growth_to_swing=0)
    )
    assert without.suspected  # what the verdict said before it compared growth with the swing
    verdict = trend_report(times, values, times[-1]).verdict
    assert not verdict.suspected and "within its own swing" in verdict.reason, verdict.reason


def test_a_leak_is_found_once_it_outgrows_the_sawtooth() -> None:
    times, values = _sawtooth(LEAK_BYTES_PER_S * 4, 420, 60)  # 160 MiB/min: 1.1 GiB in 7 minutes
    assert trend_report(times, values, times[-1]).verdict.suspected


@pytest.mark.parametrize(
    ("load_from", "load_to", "follows"),
    [
        (0.6, 0.6, False),  # flat load: the growth is extrapolated (a leak's exhaustion)
        (0.6, 0.4, False),  # growth while the load fell: nothing explains it but a leak
        (0.3, 0.97, True),  # a ramp: memory follows traffic, bounded by the engine's budget
    ],
)
def test_exhaustion_is_not_extrapolated_from_growth_that_follows_a_load_rise(
    load_from: float, load_to: float, follows: bool
) -> None:
    times = [float(t) for t in range(600)]
    memory = [60 * GIB + LEAK_BYTES_PER_S * 4 * t for t in times]
    load = (times[::5], [load_from + (load_to - load_from) * t / 600 for t in times[::5]])
    report = trend_report(times, memory, times[-1], load)
    assert report.slopes["5m"] > 0
    assert (report.exhaustion_slope("5m") is None) is follows
    assert ("5m" in report.follows_load) is follows


@pytest.mark.parametrize(
    ("per_half", "rise", "rose"),
    [
        (30, 0.5, True),  # a clear rise, well sampled
        (30, 0.1, False),  # under the 20% a rise must reach
        (5, 0.5, False),  # 5 samples a half: their variance cannot bound the noise, so no verdict
    ],
)
def test_a_load_rise_counts_when_it_is_large_and_well_sampled(per_half: int, rise: float, rose: bool) -> None:
    rng = random.Random(3)
    times = [float(t) for t in range(2 * per_half)]
    load = [(1.0 if t < per_half else 1.0 + rise) * rng.uniform(0.95, 1.05) for t in range(2 * per_half)]
    assert load_rose((times, load), since=0.0) is rose


@pytest.mark.parametrize("ramp_first", [True, False])
def test_the_load_that_moved_most_between_halves_decides_not_its_last_sample(ramp_first: bool) -> None:
    times = [float(t) for t in range(60)]
    ramp = (times, [0.3 + 0.3 * t / 60 for t in times])  # +60% between the halves' means
    # Flat with one spike at the end: last minus first reads +100%, the halves barely differ.
    spiky = (times, [0.5] * 59 + [1.0])
    candidates = [ramp, spiky] if ramp_first else [spiky, ramp]
    assert _most_moving(candidates) is ramp
