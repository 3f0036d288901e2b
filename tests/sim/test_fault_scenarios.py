"""The fault scenarios hit the targets they name, at the time they say, and heal when they say."""

from __future__ import annotations

import math

import pytest

from servescope_sim.engines import gpu_groups
from servescope_sim.fault_scenarios import FaultPlan, Tour
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.models import MIB
from servescope_sim.registry import LEAK_ENV, SCENARIOS, make_scenario
from servescope_sim.scenarios import PACES, STEADY_ENGINE, KvPressure, MemoryLeak

LAYOUT = gpu_groups(8, 4)  # [[0, 1], [2, 3], [4, 5], [6, 7]]
FAULT_START_SECONDS = PACES["real"].fault_start_seconds


def fleet(gpus: int = 8) -> SimulatedFleet:
    now = [0.0]
    return SimulatedFleet(gpus, seed=1, clock=lambda: now[0])


def test_every_scenario_is_built_from_its_name_at_both_paces() -> None:
    assert len(set(SCENARIOS)) == len(SCENARIOS) == 10
    for pace in PACES:
        for name in SCENARIOS:
            scenario = make_scenario(name, pace=pace, layout=LAYOUT)
            assert scenario.name == name and scenario.description
    with pytest.raises(ValueError, match="unknown pace"):
        make_scenario("tour", pace="fast")
    with pytest.raises(ValueError, match="unknown scenario 'leak'; known: steady, memory-leak"):
        make_scenario("leak")


def test_nvlink_crc_counts_on_gpu_1_link_0_from_20_s() -> None:
    scenario, node = make_scenario("nvlink-crc"), fleet()
    scenario.apply(node, FAULT_START_SECONDS - 1)
    assert node.gpus[1].crc_rates.get(0, 0.0) == 0.0
    scenario.apply(node, FAULT_START_SECONDS)
    assert node.gpus[1].crc_rates == {0: 5.0}
    assert all(not g.crc_rates or set(g.crc_rates.values()) == {0.0} for g in node.gpus if g.index != 1)


def test_gpu_lost_emits_xid_79_once_and_loses_gpu_2() -> None:
    scenario, node = make_scenario("gpu-lost"), fleet()
    scenario.apply(node, 5.0)
    assert not node.gpus[2].lost and node.xid_queue == []
    for t in (FAULT_START_SECONDS, FAULT_START_SECONDS + 1, FAULT_START_SECONDS + 2):
        scenario.apply(node, t)
    assert node.gpus[2].lost and node.xid_queue == [(2, 79)]
    assert [g.index for g in node.gpus if g.lost] == [2]


def test_vllm_down_takes_engine_1_down_and_idles_its_gpus() -> None:
    scenario, node = make_scenario("vllm-down", layout=LAYOUT), fleet()
    assert scenario.engine_loads(10.0, 4) == [STEADY_ENGINE] * 4
    loads = scenario.engine_loads(30.0, 4)
    assert [load.down for load in loads] == [False, True, False, False]
    scenario.apply(node, 30.0)
    assert [g.load_override for g in node.gpus] == [0.6, 0.6, 0.0, 0.0, 0.6, 0.6, 0.6, 0.6]


def test_kv_pressure_with_a_layout_hits_engine_0_and_its_gpus_only() -> None:
    scenario, node = make_scenario("kv-pressure", pace="demo", layout=LAYOUT), fleet()
    assert isinstance(scenario, KvPressure) and scenario.gpus == (0, 1)
    scenario.apply(node, 60.0)
    assert [g.load_override for g in node.gpus] == [0.95, 0.95] + [0.6] * 6
    loads = scenario.engine_loads(PACES["demo"].kv_ramp_seconds, 4)
    assert loads[0].concurrency == 240 and loads[0].prompt_tokens == 4096
    assert loads[1:] == [STEADY_ENGINE] * 3


def test_kv_pressure_without_a_layout_keeps_every_engine_and_gpu_busy() -> None:
    scenario, node = make_scenario("kv-pressure"), fleet(2)
    scenario.apply(node, 60.0)
    assert [g.load_override for g in node.gpus] == [0.9, 0.9]
    assert len({load.concurrency for load in scenario.engine_loads(900.0, 3)}) == 1


def test_tour_runs_each_fault_in_turn_on_distinct_targets_and_heals_them() -> None:
    scenario = make_scenario("tour", pace="demo", layout=LAYOUT)
    assert isinstance(scenario, Tour)
    phase = PACES["demo"].phase_seconds
    assert scenario.kv is not None and scenario.crc is not None and scenario.down is not None
    assert scenario.leak is not None and scenario.lost is not None
    # Distinct targets: the kv engine's GPUs, the CRC GPU, the down engine's GPUs, the leaking GPU.
    assert scenario.kv.gpus == (0, 1) and scenario.crc.gpu == 2 and scenario.down.gpus == (4, 5)
    assert scenario.leak.gpu == 6 and scenario.lost.gpu == 7
    starts = [scenario.kv.window.start, scenario.crc.window.start, scenario.down.window.start]
    assert starts == sorted(starts) and starts[1] - starts[0] == phase
    assert scenario.kv.window.end == scenario.crc.window.start  # one fault at a time
    timeline = scenario.timeline()
    assert [t for t, _ in timeline] == sorted(t for t, _ in timeline)
    assert [what for t, what in timeline if t == scenario.crc.window.start] == [
        "KV-cache pressure on engine 0 (GPUs 0,1) ends",
        "NVLink CRC error storm on GPU 2",
    ]

    node = fleet()
    during = scenario.crc.window.start + 10
    scenario.apply(node, during)
    assert node.gpus[2].crc_rates == {0: 5.0}
    scenario.apply(node, scenario.crc.window.end + 1)
    assert node.gpus[2].crc_rates == {0: 0.0}  # healed: the counter stops growing
    loads = scenario.engine_loads(scenario.down.window.start + 1, 4)
    assert [load.down for load in loads] == [False, False, True, False]
    assert not any(load.down for load in scenario.engine_loads(scenario.down.window.end + 1, 4))


def test_tour_at_the_demo_pace_ooms_the_leaking_gpu_before_the_last_gpu_is_lost() -> None:
    scenario = make_scenario("tour", pace="demo", layout=LAYOUT)
    assert isinstance(scenario, FaultPlan) and scenario.leak is not None and scenario.lost is not None
    now = [0.0]
    node = SimulatedFleet(8, seed=1, clock=lambda: now[0])
    end = scenario.lost.window.start + 5
    while now[0] < end:
        scenario.apply(node, node.elapsed)
        now[0] += 5.0
        node.advance()
    leak = node.gpus[scenario.leak.gpu]
    assert not leak.serving and leak.oom_at is not None and leak.oom_at < scenario.lost.window.start
    assert node.gpus[scenario.lost.gpu].lost
    assert math.isinf(scenario.leak.window.end)  # the leak runs until the OOM ends it


def test_the_environment_can_set_the_leak_rate_of_the_leak_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAK_ENV, "2560")
    leak = make_scenario("memory-leak", pace="demo")
    assert isinstance(leak, MemoryLeak) and leak.leak_mib_per_minute == 2560.0
    tour = make_scenario("tour", pace="demo", layout=LAYOUT)
    assert isinstance(tour, Tour) and tour.leak_bytes_per_second == 2560 * MIB / 60
    # An explicit rate still wins over the environment.
    explicit = make_scenario("memory-leak", leak_mib_per_minute=5.0)
    assert isinstance(explicit, MemoryLeak) and explicit.leak_mib_per_minute == 5.0
    monkeypatch.delenv(LEAK_ENV)
    paced = make_scenario("memory-leak", pace="demo")
    assert isinstance(paced, MemoryLeak) and paced.leak_mib_per_minute == PACES["demo"].leak_mib_per_minute


@pytest.mark.parametrize("value", ["fast", "0", "-3"])
def test_a_bad_leak_rate_in_the_environment_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(LEAK_ENV, value)
    with pytest.raises(ValueError, match=LEAK_ENV if value == "fast" else "leak_mib_per_minute must be > 0"):
        make_scenario("memory-leak")
