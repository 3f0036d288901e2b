"""Pages per incident, judged by a real Alertmanager with the committed configuration: hand-made firing
episodes replayed into it; the node library's new faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.quality.evaluate import Episode, RunOutcome
from bench.quality.faults import PCIE_NARROW_WIDTH, EngineCurve, FaultableEngine, NodeFaults, StuckKv
from bench.quality.library import library
from bench.quality.pager import Alertmanager, Page, per_incident, replay
from bench.quality.scenarios import ENGINE, Curve, SloBurn, flat
from bench.quality.sglang_text import SglangText, use_sglang_buckets
from bench.quality.truth import TruthWindow
from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope_sim.fault_scenarios import GpuFault, Window
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml

OURS = (("bundle", "servescope"),)
ENGINE_0 = (("endpoint", "http://10.1.0.5:8000/metrics"), ("engine", "0"), ("instance", "node-a"))


def _episode(alert: str, severity: str, start: float, end: float, *labels: tuple[str, str]) -> Episode:
    return Episode(alert, severity, "s", 1, (*OURS, ("severity", severity), *labels), start, end)


def _window(name: str, start: float, end: float, expect: tuple[str, ...]) -> TruthWindow:
    return TruthWindow(name, start, end, expect, (), (), 300.0)  # a 5 min grace after the end


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    with Alertmanager(ALERTS_BUILD / "alertmanager.yaml", tmp_path_factory.mktemp("am")) as am:
        yield am


def _pages(am: Alertmanager, *episodes: Episode, windows: tuple[TruthWindow, ...] = ()) -> list[Page]:
    return replay(am, RunOutcome("s", 1, windows, episodes))


@pytest.mark.e2e
def test_a_burn_and_its_kv_page_on_one_model_are_one_page(alertmanager: Alertmanager) -> None:
    model = ("model_name", "deepseek")
    burn = _episode("ServescopeTtftSloBurnFast", "critical", 600, 3000, model)
    kv = _episode(
        "ServescopeKvPressureHurtingRequests", "critical", 780, 2700, model, *ENGINE_0, ("hostname", "node-a")
    )
    ticket = _episode("ServescopeKvCachePressure", "warning", 500, 2700, model, *ENGINE_0)
    other = _episode("ServescopeTtftSloBurnFast", "critical", 900, 1200, ("model_name", "qwen"))
    pages = _pages(alertmanager, burn, kv, ticket, other)
    # One page per model: the burn opens deepseek's, the KV page joins it (and mutes the burn); qwen's own.
    assert [(p.at, dict(p.group), sorted(a.alert for a in p.alerts)) for p in pages] == [
        (600.0, {"model_name": "deepseek"}, ["ServescopeTtftSloBurnFast"]),
        (900.0, {"model_name": "qwen"}, ["ServescopeTtftSloBurnFast"]),
    ]


@pytest.mark.e2e
def test_a_group_closed_longer_than_its_group_interval_pages_again(alertmanager: Alertmanager) -> None:
    model = ("model_name", "mistral")
    first = _episode("ServescopeAvailabilitySloBurnFast", "critical", 600, 900, model)
    soon = _episode("ServescopeAvailabilitySloBurnFast", "critical", 1000, 1100, model)  # back within 5 min
    later = _episode("ServescopeAvailabilitySloBurnFast", "critical", 1500, 1600, model)  # closed 400 s
    window = _window("mistral unavailable", 600, 1000, ("ServescopeAvailabilitySloBurnFast",))
    pages = _pages(alertmanager, first, soon, later, windows=(window,))
    assert [p.at for p in pages] == [600.0, 1500.0]
    counts, false = per_incident(RunOutcome("s", 1, (window,), (first, soon, later)), pages)
    assert counts == {"mistral unavailable": 1}
    assert [p.at for p in false] == [1500.0]  # after the incident's grace: a page no incident explains


@pytest.mark.e2e
def test_the_blind_fleet_is_one_page_and_tickets_never_page(alertmanager: Alertmanager) -> None:
    absent = _episode("ServescopeExporterTargetsAbsent", "critical", 600, 1800, ("job", "servescope"))
    blind = _episode("ServescopeMonitoringBlind", "critical", 630, 1800)
    down = _episode(
        "ServescopeExporterDown", "warning", 300, 1800, ("instance", "node-a"), ("job", "servescope")
    )
    lost = _episode("ServescopeGpuLost", "warning", 300, 1800, ("instance", "node-b"), ("uuid", "GPU-1"))
    pages = _pages(alertmanager, absent, blind, down, lost)
    assert [(p.at, dict(p.group), [a.alert for a in p.alerts]) for p in pages] == [
        (600.0, {}, ["ServescopeExporterTargetsAbsent"])
    ]


def test_a_node_wide_nvml_failure_fails_init_and_every_device_call_until_it_heals() -> None:
    fleet = SimulatedFleet(2, "H100", seed=1)
    faults = NodeFaults(nvml_failure=Window(60.0, 120.0))
    faults.apply(fleet, 60.0)
    assert fleet.init_error == 9  # NVML_ERROR_DRIVER_NOT_LOADED
    assert fleet.unsupported[(None, "nvmlDeviceGetUtilizationRates")] == 9
    faults.apply(fleet, 120.0)
    assert fleet.init_error is None and not fleet.unsupported


def test_the_library_has_the_node_and_serving_scenarios_each_with_what_it_must_hear() -> None:
    plans = {p.name: p for p in library()}
    expected = {
        "nvml-node-failure": {"ServescopeGpuNodeNvmlLost"},
        "nvml-hung": {"ServescopeSourceStale"},
        "nvlink-link-down": {"ServescopeNvlinkLinkDown"},
        "crc-burst-link-dies": {"ServescopeNvlinkCrcErrors", "ServescopeNvlinkLinkDown"},
        "scheduler-hang": {"ServescopeSchedulerStuck", "ServescopeAvailabilitySloBurnFast"},
        "dp-unequal": {"ServescopeGpuSaturated", "ServescopeFleetCapacityBufferLow"},
        "tp8-saturated": {"ServescopeGpuSaturated", "ServescopeFleetCapacityBufferLow"},
        "exporter-rollout": set(),
        "kv-stuck-idle": set(),
        "sglang-next-to-vllm": {"ServescopeSloBucketMissing"},
        "quiet-night": set(),
        "pcie-link-narrow": {"ServescopePcieLinkDegraded"},
        "day-then-kv-and-endpoint": {
            "ServescopeKvCacheAnomaly",
            "ServescopeKvCachePressure",
            "ServescopeServingEndpointDown",
            "ServescopeHealthyEndpointsLow",
        },
    }
    for name, alerts in expected.items():
        # Besides the pages every plan expects from its truth (an SLO burning at a paging rate).
        stated = [i for i in plans[name].incidents if not isinstance(i.when, SloBurn) or i.when.hung]
        assert {a for i in stated for a in i.expect} == alerts, name
    assert plans["tp8-saturated"].gpus == 8
    # The KV anomaly reads 23 h back: the night comes after a whole day of baseline.
    for name in ("quiet-night", "day-then-kv-and-endpoint"):
        assert plans[name].duration > 24 * 3600 and plans[name].slow, name


def test_a_pcie_link_trained_narrow_reports_fewer_lanes_from_the_fault_on() -> None:
    faults = NodeFaults(pcie_narrow=GpuFault(1, Window(600.0)))
    assert (faults.pcie_widths(300.0), faults.pcie_widths(600.0)) == ({}, {1: PCIE_NARROW_WIDTH})
    module = SimulatedPynvml(SimulatedFleet(2, "H100", seed=1))
    module.pcie_trained_width = faults.pcie_widths(600.0)
    module.nvmlInit()
    handles = [module.nvmlDeviceGetHandleByIndex(i) for i in (0, 1)]
    assert [module.nvmlDeviceGetCurrPcieLinkWidth(h) for h in handles] == [16, PCIE_NARROW_WIDTH]


def test_an_engine_of_its_own_curve_gets_its_arrivals_and_its_gpus_their_load() -> None:
    ramp = Curve(((0.0, 0.3), (600.0, 0.9)))
    faults = NodeFaults(curve=flat(0.5), engine_curves=(EngineCurve(0, (0,), ramp),))
    fleet = SimulatedFleet(2, "H100", seed=1)
    faults.apply(fleet, 600.0)
    assert [round(g.load_override or 0.0, 6) for g in fleet.gpus] == [0.9, 0.5]
    assert [load.arrival_rate for load in faults.engine_loads(600.0, 2)] == [1.8, 1.0]


def test_a_stuck_kv_gauge_reads_high_while_the_engine_holds_no_block() -> None:
    engine = FaultableEngine(ENGINE, seed=1)
    faults = NodeFaults(stuck_kv=StuckKv(1, 0.95, Window(60.0)))
    assert (faults.kv_floor(1, 30.0), faults.kv_floor(0, 90.0), faults.kv_floor(1, 90.0)) == (
        None,
        None,
        0.95,
    )
    engine.kv_floor = 0.95
    assert (engine.kv_cache_usage, engine.real_kv_cache_usage) == (0.95, 0.0)


def test_the_sglang_text_has_sglang_buckets_and_the_engine_keeps_its_own() -> None:
    engine = FaultableEngine(ENGINE, seed=1)
    use_sglang_buckets(engine)
    engine.set_load(arrival_rate=1.0, prompt_tokens=512, output_tokens=64)
    engine.advance_to(120.0)
    text = SglangText().render(engine)
    ttft = engine.stats.histograms["time_to_first_token_seconds"]
    assert 'sglang:time_to_first_token_seconds_bucket{le="0.4",model_name="sim-llm"}' in text
    assert 'le="0.5"' not in text.split("sglang:e2e")[0]  # TTFT jumps from 0.4 to 0.6
    assert f'sglang:time_to_first_token_seconds_count{{model_name="sim-llm"}} {ttft.count}' in text
    assert ttft.count > 0 and 0.5 in ttft.bounds  # the truth still reads vLLM's buckets
