"""The fleet library of the alert-quality benchmark: its model (pods' phases, what kube-state-metrics says
and when), and the paging targets judged over its quick scenarios in both topologies, by promtool's rule
engine and a real Alertmanager, as `bench/alert_quality.py --library fleet --quick` judges them."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench.quality.fleet_library import PAGES
from bench.quality.fleet_library import library as fleet_library
from bench.quality.fleet_model import CRASH_CYCLE, CRASH_UP, STEP, Fleet, Model, Phase, Pod
from bench.quality.fleet_plan import nodes, replaced
from bench.quality.fleet_series import FleetSeries

BENCH = Path(__file__).parents[2] / "bench"
MINUTE = 60.0


def _bench_script() -> ModuleType:
    # bench/ is a folder of scripts: load alert_quality.py by path, as `make bench` runs it.
    spec = importlib.util.spec_from_file_location("bench_alert_quality", BENCH / "alert_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_crash_loop_answers_the_last_minute_of_each_cycle_and_restarts_once_a_cycle() -> None:
    pod = Pod("m-0", "m", "node-1", (0,), "10.1.0.10", (Phase(0, "serving"), Phase(600, "crashloop")))
    assert pod.state(599) == "serving" and pod.restarts(599) == 0
    assert pod.state(600) == "crashloop-down" and pod.restarts(600) == 1
    assert pod.state(600 + CRASH_CYCLE - CRASH_UP - 1) == "crashloop-down"
    assert pod.state(600 + CRASH_CYCLE - CRASH_UP) == "crashloop-up"
    assert pod.restarts(600 + CRASH_CYCLE) == 2


def test_kube_state_metrics_says_a_pod_is_deleted_a_scrape_after_its_engine_stopped() -> None:
    """A replaced pod: terminating from 5 min (its engine stops), gone at 6 min. Its target fails at
    once; kube-state-metrics, scraped as the rest, says so one scrape later, and forgets it one later."""
    old = Pod("m-old", "m", "node-1", (0,), "10.1.0.10", replaced(MINUTE, loading=4 * MINUTE))
    fleet = Fleet("f", "one pod replaced", 10, nodes(1), (Model("m"),), (old,))
    series = FleetSeries(fleet, podmonitor=True, seed=1)
    series.run()
    by_name = {name: v for (name, labels), v in series.out.values.items() if ("pod", "m-old") in labels}
    stop = int(5 * MINUTE / STEP)
    assert by_name["up"][stop - 1 : stop + 2] == [1.0, 0.0, 0.0]  # the engine stopped at 5 min
    assert by_name["up"][stop + 2] is None  # the pod and its target gone at 6 min
    deleted = [v is not None for v in by_name["kube_pod_deletion_timestamp"][stop : stop + 4]]
    assert deleted == [False, True, True, False]  # one scrape late, both ways


def test_every_paging_alert_has_a_scenario_that_needs_it_and_planned_changes_need_none() -> None:
    plans = {p.name: p for p in fleet_library()}
    needed = {alert for p in plans.values() for i in p.incidents for alert in i.expect if alert in PAGES}
    assert needed == set(PAGES)
    for planned in ("rolling-update-8", "scale-down-and-move", "diurnal-ramp"):
        assert not [i for i in plans[planned].incidents if set(i.expect) & set(PAGES)], planned


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("promtool") and shutil.which("prometheus-alertmanager")),
    reason="promtool and prometheus-alertmanager are installed by `make tools`",
)
def test_the_fleet_library_meets_the_paging_targets_in_both_topologies(tmp_path: Path) -> None:
    """Every quick fleet scenario, seed 1, both topologies: precision >= 0.95 and recall 1.0 per paging
    alert, exactly one page per incident in every paging run, no page where the SLOs hold."""
    bench = _bench_script()
    quick = [p for p in fleet_library() if not p.fleet.slow]
    data, _ = bench.run([], quick, [1], 2, tmp_path)
    paging = [a for a in data["alerts"] if a["alert"] in PAGES]
    for a in paging:
        print(
            f"{a['alert']}: precision {a['precision']}, recall {a['recall']} "
            f"({a['episodes']} episodes, {a['incidents']} incidents)"
        )
    runs = data["pages"]
    for run in runs:
        print(f"{run['scenario']} seed {run['seed']}: pages per incident {run['pages_per_incident']}")
    unmet = [t for t in data["targets"] if not t["met"] and "leak" not in t["target"].lower()]
    assert unmet == []
    assert len(runs) == 2 * len(quick)
    assert all(run["met"] for run in runs), [run for run in runs if not run["met"]]
