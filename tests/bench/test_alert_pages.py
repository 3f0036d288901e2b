"""Pages per incident: the pager route's grouping applied to firing episodes; the new scenarios' faults."""

from __future__ import annotations

from quality.evaluate import Episode, RunOutcome
from quality.faults import PCIE_NARROW_WIDTH, EngineCurve, FaultableEngine, NodeFaults, StuckKv
from quality.library import library
from quality.pages import PagerTiming, pager_timing, pages, per_incident
from quality.scenarios import ENGINE, Curve, flat
from quality.sglang_text import SglangText, use_sglang_buckets
from quality.truth import TruthWindow

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.sim.fault_scenarios import GpuFault, Window
from servescope.sim.fleet import SimulatedFleet
from servescope.sim.pynvml_module import SimulatedPynvml

TIMING_FIELDS = (("alertname", "hostname"), 30.0, 300.0, 14_400.0)
TIMING = PagerTiming(*TIMING_FIELDS)
HOST = ("hostname", "node-a")


def _page(alert: str, gpu: str, start: float, end: float, severity: str = "critical") -> Episode:
    return Episode(alert, severity, "s", 1, (("gpu", gpu), HOST), start, end)


def _window(start: float, end: float, expect: tuple[str, ...]) -> TruthWindow:
    return TruthWindow("GPU lost", start, end, expect, (), (), 0.0)


def test_the_pager_timing_is_read_from_the_committed_alertmanager_config() -> None:
    timing = pager_timing(ALERTS_BUILD / "alertmanager.yaml")
    assert (timing.group_by, timing.wait_s, timing.interval_s, timing.repeat_s) == TIMING_FIELDS
    assert timing.inhibitions  # the bundle's inhibit rules, applied to the pages


def test_a_lost_gpu_mutes_its_xid_page_with_the_committed_inhibit_rules() -> None:
    timing = pager_timing(ALERTS_BUILD / "alertmanager.yaml")
    uuid = ("uuid", "GPU-1")
    lost = Episode("ServescopeGpuLost", "critical", "s", 1, (("gpu", "1"), HOST, uuid), 660.0, 2100.0)
    xid_labels = (("gpu", "1"), HOST, uuid, ("xid", "79"))
    xid = Episode("ServescopeGpuXidCritical", "critical", "s", 1, xid_labels, 630.0, 2100.0)
    other = Episode("ServescopeGpuXidCritical", "critical", "s", 1, (("gpu", "0"), HOST), 630.0, 690.0)
    run = RunOutcome("s", 1, (), (lost, xid, other))
    # XID 79 on GPU 1 fires one step before the loss is seen: muted by the time its group would page.
    assert [(p.alert, p.at, len(p.announces)) for p in pages(run, timing)] == [
        ("ServescopeGpuXidCritical", 660.0, 1),  # GPU 0's XID, which no lost GPU explains
        ("ServescopeGpuLost", 690.0, 1),
    ]


def test_eight_gpus_of_one_node_in_one_group_make_one_page_and_a_late_joiner_another() -> None:
    at_once = [_page("ServescopeGpuLost", str(gpu), 600.0 + gpu, 1800.0) for gpu in range(8)]
    late = _page("ServescopeGpuLost", "8", 1000.0, 1800.0)  # joins at the next 5 min tick
    warning = _page("ServescopeGpuSaturated", "0", 600.0, 1800.0, severity="warning")
    run = RunOutcome("s", 1, (), (*at_once, late, warning))
    assert [(p.at, len(p.announces)) for p in pages(run, TIMING)] == [(630.0, 8), (1230.0, 1)]


def test_a_group_that_resolved_pages_again_and_each_alertname_pages_once() -> None:
    lost = _page("ServescopeGpuLost", "1", 600.0, 900.0)
    again = _page("ServescopeGpuLost", "1", 3000.0, 3300.0)
    xid = _page("ServescopeGpuXidCritical", "1", 630.0, 3300.0)
    window = _window(600.0, 1200.0, ("ServescopeGpuLost", "ServescopeGpuXidCritical"))
    found = per_incident([RunOutcome("s", 1, (window,), (lost, again, xid))], TIMING)
    assert found["alerts"] == {
        "ServescopeGpuLost": {"pages": 2, "false": 1, "reminders": 0},  # the second starts after the window
        "ServescopeGpuXidCritical": {"pages": 1, "false": 0, "reminders": 0},
    }
    assert found["incidents"] == [{"scenario": "s", "incident": "GPU lost", "pages_per_run": [2], "max": 2}]
    assert found["false_pages"] == [{"alert": "ServescopeGpuLost", "scenario": "s", "seed": 1, "at": 3030.0}]


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
        "scheduler-hang": {"ServescopeSchedulerStuck"},
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
        assert {a for i in plans[name].incidents for a in i.expect} == alerts, name
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


def test_a_group_firing_past_the_repeat_interval_sends_reminders_that_are_not_pages() -> None:
    day = _page("ServescopeE2eSloBurnFast", "0", 600.0, 600.0 + 9 * 3600)
    window = _window(600.0, 600.0 + 9 * 3600, ("ServescopeE2eSloBurnFast",))
    sent = pages(RunOutcome("s", 1, (window,), (day,)), TIMING)
    assert [(p.at, p.reminder) for p in sent] == [(630.0, False), (15_030.0, True), (29_430.0, True)]
    found = per_incident([RunOutcome("s", 1, (window,), (day,))], TIMING)
    assert found["alerts"] == {"ServescopeE2eSloBurnFast": {"pages": 1, "false": 0, "reminders": 2}}
    assert found["incidents"][0]["pages_per_run"] == [1]
