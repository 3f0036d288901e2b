"""Named scenarios drive the simulated fleet and engines the way their detector tests need."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from servescope_sim.fleet import SimulatedFleet
from servescope_sim.models import MIB
from servescope_sim.registry import SCENARIOS, make_scenario
from servescope_sim.scenarios import EngineLoad, Scenario, workspace_for
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine


def run(scenario: Scenario, seconds: float, *, gpus: int = 2, seed: int = 1) -> Iterator[SimulatedFleet]:
    """Apply the scenario every simulated second, as the demo does, yielding the fleet after each."""
    now = [0.0]
    fleet = SimulatedFleet(gpus, seed=seed, clock=lambda: now[0])
    while fleet.elapsed < seconds:
        scenario.apply(fleet, fleet.elapsed)
        now[0] += 1.0
        fleet.advance()
        yield fleet


def slope(times: list[float], values: list[float]) -> float:
    """Least-squares slope."""
    mt, mv = sum(times) / len(times), sum(values) / len(values)
    cov = sum((t - mt) * (v - mv) for t, v in zip(times, values, strict=True))
    return cov / sum((t - mt) ** 2 for t in times)


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="steady, memory-leak, traffic-ramp, kv-pressure"):
        make_scenario("meltdown")
    assert [make_scenario(name).name for name in SCENARIOS] == list(SCENARIOS)
    assert all(make_scenario(name).description for name in SCENARIOS)


def test_apply_is_idempotent() -> None:
    scenario = make_scenario("memory-leak", gpu=1)
    now = [0.0]
    once, twice = (SimulatedFleet(2, seed=3, clock=lambda: now[0]) for _ in range(2))
    for t in range(1, 121):
        scenario.apply(once, once.elapsed)
        scenario.apply(twice, twice.elapsed)
        scenario.apply(twice, twice.elapsed)
        now[0] = float(t)
        once.advance()
        twice.advance()
    assert [g.used_bytes for g in once.gpus] == [g.used_bytes for g in twice.gpus]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_steady_memory_has_no_trend_over_an_hour(seed: int) -> None:
    times, used = [], []
    for fleet in run(make_scenario("steady"), 3600.0, gpus=1, seed=seed):
        times.append(fleet.elapsed)
        used.append(fleet.gpus[0].used_bytes / MIB)
    gpu = fleet.gpus[0]
    assert abs(slope(times[60:], used[60:]) * 60) < 0.1  # MiB/min, against a 1 MiB/min leak
    assert max(used[60:]) - min(used[60:]) > 100  # yet it moves: the sawtooth and the noise
    assert gpu.serving and math.isinf(fleet.true_seconds_to_exhaustion(0))
    assert make_scenario("steady").engine_load(100.0) == EngineLoad(4.0, 0, 512, 128)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_memory_leak_grows_40_mib_per_minute_on_its_gpu_only(seed: int) -> None:
    times, leaking, healthy = [], [], []
    for fleet in run(make_scenario("memory-leak", gpu=1), 600.0, seed=seed):
        times.append(fleet.elapsed)
        healthy.append(fleet.gpus[0].used_bytes / MIB)
        leaking.append(fleet.gpus[1].used_bytes / MIB)
    assert slope(times, leaking) * 60 == pytest.approx(40.0, rel=0.05)
    assert abs(slope(times, healthy) * 60) < 2.0


def test_memory_leak_ooms_at_about_the_true_time_to_exhaustion() -> None:
    scenario = make_scenario("memory-leak", leak_mib_per_minute=2048.0)
    truth_at_60 = math.inf
    for fleet in run(scenario, 1200.0):
        if fleet.elapsed == 60.0:
            truth_at_60 = 60.0 + fleet.true_seconds_to_exhaustion(0)
        if not fleet.gpus[0].serving:
            break
    oom_at = fleet.gpus[0].oom_at
    assert oom_at is not None and math.isfinite(truth_at_60)
    # The trend reaches total at the true time; the sawtooth's peaks and the noise get there first.
    assert truth_at_60 - 5.0 <= oom_at <= truth_at_60 + 1.0
    assert fleet.gpus[1].serving


def test_traffic_ramp_memory_follows_load() -> None:
    scenario = make_scenario("traffic-ramp", ramp_seconds=600.0)
    loads, used = [], []
    for fleet in run(scenario, 900.0, gpus=1):
        loads.append(fleet.gpus[0].load)
        used.append(fleet.gpus[0].used_bytes)
    gpu = fleet.gpus[0]
    early, late = slice(30, 60), slice(-60, None)
    assert sum(loads[early]) / 30 == pytest.approx(0.2 + 0.8 * 45 / 600, abs=0.03)
    assert sum(loads[late]) / 60 == pytest.approx(1.0, abs=0.03)
    grew = sum(used[late]) / 60 - sum(used[early]) / 30
    assert grew == pytest.approx(workspace_for(gpu) * (1.0 - (0.2 + 0.8 * 45 / 600)), rel=0.05)
    assert gpu.serving and gpu.leak_rate == 0 and math.isinf(fleet.true_seconds_to_exhaustion(0))
    rates = [scenario.engine_load(t).arrival_rate for t in (0.0, 300.0, 600.0, 5000.0)]
    assert rates == [1.0, 4.5, 8.0, 8.0]


def test_workspace_fits_small_gpus() -> None:
    # A tenth of an L40S, inside the budget: full traffic must not kill its engine.
    assert workspace_for(SimulatedFleet(1, "H200").gpus[0]) == 6 * 1024 * MIB
    now = [0.0]
    small = SimulatedFleet(1, "L40S", clock=lambda: now[0])
    scenario = make_scenario("traffic-ramp", ramp_seconds=60.0)
    while small.elapsed < 300.0:
        scenario.apply(small, small.elapsed)
        now[0] += 1.0
        small.advance()
    assert small.gpus[0].load > 0.95
    assert small.gpus[0].serving and 0 < workspace_for(small.gpus[0]) < 6 * 1024 * MIB


def test_kv_pressure_climbs_toward_saturation_with_flat_device_memory() -> None:
    scenario = make_scenario("kv-pressure")
    engine = SimulatedEngine(EngineConfig(arrival_rate=0.0), seed=1)
    current: EngineLoad | None = None
    kv, used = [], []
    fleets = run(scenario, 1800.0, gpus=1)
    for t in range(1800):
        load = scenario.engine_load(float(t))
        if load != current:  # set_load redraws arrivals: call it only when the load changes
            engine.set_load(
                arrival_rate=load.arrival_rate,
                concurrency=load.concurrency,
                prompt_tokens=load.prompt_tokens,
                output_tokens=load.output_tokens,
            )
            current = load
        engine.advance_to(float(t))
        kv.append(engine.kv_cache_usage)
        used.append(next(fleets).gpus[0].used_bytes / MIB)
    first, last = sum(kv[:300]) / 300, sum(kv[-300:]) / 300
    assert first < 0.15 and last > 0.75
    assert engine.stats.preemptions == 0  # pressure, not yet thrashing
    assert abs(slope(list(range(60, 1800)), used[60:]) * 60) < 0.5  # vLLM's KV pool is preallocated


def test_make_scenario_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="leak_mib_per_minute"):
        make_scenario("memory-leak", leak_mib_per_minute=0.0)
    with pytest.raises(ValueError, match="ramp_seconds"):
        make_scenario("traffic-ramp", ramp_seconds=-1.0)
    with pytest.raises(ValueError, match="fleet has 2 GPUs"):
        next(run(make_scenario("memory-leak", gpu=5), 10.0))


def test_hardware_faults_start_at_20_s_and_xids_are_emitted_once() -> None:
    fleet = SimulatedFleet(4, "H200")
    scenario = make_scenario("hardware-faults")
    scenario.apply(fleet, 10.0)
    assert fleet.xid_queue == [] and fleet.gpus[0].pcie_replays == 0
    scenario.apply(fleet, 25.0)
    scenario.apply(fleet, 26.0)
    assert sorted(fleet.xid_queue) == [(2, 79), (3, 48)]
    assert fleet.gpus[2].lost
    assert fleet.gpus[1].crc_rates == {0: 5.0}
    assert fleet.gpus[0].pcie_replays == 18
    scenario.apply(fleet, 26.0)  # the same second again: nothing more
    assert fleet.gpus[0].pcie_replays == 18 and len(fleet.xid_queue) == 2
