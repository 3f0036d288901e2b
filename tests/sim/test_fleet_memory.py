"""The simulated fleet's memory model: workspace, allocator sawtooth, noise, spikes, OOM."""

from __future__ import annotations

import itertools
import math

import pytest

from servescope_sim.fleet import STEP_SECONDS, SimulatedFleet
from servescope_sim.models import MIB

GIB = 1024 * MIB


def fleet_at(gpus: int = 2, seed: int = 1, model: str = "H200") -> tuple[SimulatedFleet, list[float]]:
    now = [0.0]
    return SimulatedFleet(gpus, model, seed=seed, clock=lambda: now[0]), now


def step_to(fleet: SimulatedFleet, now: list[float], t: float) -> None:
    now[0] = t
    fleet.advance()


def test_without_knobs_used_is_reserved_plus_pool_plus_leaked() -> None:
    fleet, now = fleet_at(3)
    fleet.start_leak(2, 10 * MIB)
    for t in (0.0, 7.5, 60.0, 300.0):
        step_to(fleet, now, t)
        for gpu in fleet.gpus:
            expected = gpu.model.reserved_bytes + gpu.pool_bytes + gpu.leaked
            assert gpu.used_bytes == int(min(expected, gpu.model.memory_bytes))
            assert gpu.jitter == 0.0 and gpu.sawtooth_level == 0.0 and gpu.spike_level == 0.0
    assert fleet.gpus[2].leaked == pytest.approx(300 * 10 * MIB)


def test_sawtooth_is_bounded_and_periodic() -> None:
    fleet, now = fleet_at(1)
    fleet.set_load(0, 0.5)
    fleet.set_memory_profile(None, sawtooth_bytes=256 * MIB, sawtooth_period_s=30.0)
    gpu = fleet.gpus[0]
    base = gpu.model.reserved_bytes + gpu.pool_bytes
    levels = []
    for i in range(1, 241):  # two minutes, every step
        step_to(fleet, now, i * STEP_SECONDS)
        levels.append(gpu.used_bytes - base)
    assert all(0 <= level < 256 * MIB for level in levels)
    assert max(levels) > 240 * MIB and min(levels) < 16 * MIB  # the full height is covered
    per_period = int(30.0 / STEP_SECONDS)
    assert levels[:per_period] == levels[per_period : 2 * per_period]
    drops = sum(1 for a, b in itertools.pairwise(levels) if b < a)
    assert drops == 4  # one cache flush per period: a sawtooth, not noise


def test_sawtooth_phase_differs_between_gpus_but_not_between_runs() -> None:
    def levels(seed: int) -> list[float]:
        fleet, now = fleet_at(2, seed=seed)
        fleet.set_memory_profile(None, sawtooth_bytes=128 * MIB, sawtooth_period_s=45.0)
        step_to(fleet, now, 10.0)
        return [gpu.sawtooth_level for gpu in fleet.gpus]

    first = levels(3)
    assert first == levels(3)
    assert first[0] != first[1]


def test_noise_is_deterministic_per_seed_and_reading_has_no_side_effects() -> None:
    def series(seed: int) -> list[int]:
        fleet, now = fleet_at(1, seed=seed)
        fleet.set_load(0, 0.5)
        fleet.set_memory_profile(0, noise_bytes=8 * MIB)
        out = []
        for i in range(1, 201):
            step_to(fleet, now, i * STEP_SECONDS)
            out.append(fleet.gpus[0].used_bytes)
            assert fleet.gpus[0].used_bytes == out[-1]  # a second read changes nothing
        return out

    a, b, other = series(4), series(4), series(5)
    assert a == b and a != other
    spread = [x - min(a) for x in a]
    assert 8 * MIB < max(spread) < 80 * MIB  # Gaussian with an 8 MiB sigma, over 200 draws


def test_spike_shows_for_exactly_its_duration() -> None:
    fleet, now = fleet_at(1)
    fleet.set_load(0, 0.5)
    step_to(fleet, now, 10.0)
    before = fleet.gpus[0].used_bytes
    fleet.spike(0, 2 * GIB, 2.0)
    seen = []
    t = 10.0
    while t < 15.0:
        seen.append((t, fleet.gpus[0].used_bytes - before))
        t += STEP_SECONDS
        step_to(fleet, now, t)
    spiked = [t for t, extra in seen if extra == 2 * GIB]
    assert spiked == [10.0, 10.5, 11.0, 11.5]
    assert all(extra == 0 for t, extra in seen if t >= 12.0)
    assert fleet.gpus[0].spikes == []


def test_spike_starts_at_the_clocks_now_even_before_anyone_advanced() -> None:
    fleet, now = fleet_at(1)
    now[0] = 100.0  # nobody polled since 0
    fleet.spike(0, 1 * GIB, 2.0)
    step_to(fleet, now, 101.0)
    assert fleet.gpus[0].spike_level == 1 * GIB
    step_to(fleet, now, 102.0)
    assert fleet.gpus[0].spike_level == 0


def test_workspace_follows_load() -> None:
    fleet, now = fleet_at(1)
    fleet.set_memory_profile(0, workspace_bytes=6 * GIB)
    gpu = fleet.gpus[0]
    base = gpu.model.reserved_bytes + gpu.pool_bytes
    fleet.set_load(0, 0.2)
    step_to(fleet, now, 30.0)
    low = gpu.used_bytes - base
    fleet.set_load(0, 1.0)
    step_to(fleet, now, 60.0)
    high = gpu.used_bytes - base
    assert low == pytest.approx(0.2 * 6 * GIB, rel=0.01)
    assert high == pytest.approx(6 * GIB, rel=0.01)


def test_profile_rejects_negative_knobs_and_a_sawtooth_without_a_period() -> None:
    fleet, _ = fleet_at(1)
    with pytest.raises(ValueError, match="noise_bytes"):
        fleet.set_memory_profile(None, noise_bytes=-1.0)
    with pytest.raises(ValueError, match="sawtooth_period_s"):
        fleet.set_memory_profile(0, sawtooth_bytes=MIB)
    with pytest.raises(ValueError, match="spike"):
        fleet.spike(0, MIB, 0.0)


def test_leak_ooms_when_memory_reaches_total_at_about_the_true_time() -> None:
    fleet, now = fleet_at(2)
    fleet.set_memory_profile(None, workspace_bytes=4 * GIB, sawtooth_bytes=64 * MIB, sawtooth_period_s=20.0)
    for index in (0, 1):
        fleet.set_load(index, 0.5)
    step_to(fleet, now, 30.0)
    fleet.start_leak(0, 1 * GIB / 60)
    truth = fleet.true_seconds_to_exhaustion(0)
    assert math.isinf(fleet.true_seconds_to_exhaustion(1))
    assert truth == pytest.approx(
        (fleet.gpus[0].model.memory_bytes - fleet.gpus[0].demand_bytes) / (GIB / 60), rel=0.01
    )
    t = 30.0
    while fleet.gpus[0].serving and t < 30.0 + 2 * truth:
        t += 1.0
        step_to(fleet, now, t)
    gpu = fleet.gpus[0]
    assert gpu.oom_at is not None
    # The true time is the trend's; the sawtooth's upper half makes the real OOM a little earlier.
    assert 30.0 + truth - 3.0 <= gpu.oom_at <= 30.0 + truth + STEP_SECONDS
    assert gpu.used_bytes == gpu.model.reserved_bytes and gpu.leaked == 0
    assert math.isinf(fleet.true_seconds_to_exhaustion(0))
    assert fleet.gpus[1].serving


def test_a_spike_past_total_kills_the_engine() -> None:
    fleet, now = fleet_at(1)
    gpu = fleet.gpus[0]
    fleet.spike(0, gpu.model.memory_bytes - gpu.used_bytes, 1.0)
    step_to(fleet, now, STEP_SECONDS)
    assert not gpu.serving and gpu.oom_at == STEP_SECONDS and gpu.spike_level == 0
