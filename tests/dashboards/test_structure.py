"""Every built dashboard is well formed and its queries avoid the defects of published vLLM dashboards."""

from __future__ import annotations

import re
from typing import Any

import pytest

from servescope.bundle.alerts.known_metrics import exported_metrics, is_counter
from servescope.bundle.alerts.promql import Selector, parse_promql, walk
from servescope.bundle.dashboards.build import SCHEMA_VERSION, names, stale
from servescope.bundle.dashboards.common import DASHBOARDS
from tests.dashboards.dashboards import BUILD, built, expand, panels, queries

DASHBOARD_NAMES = names()
REMOVED = (
    "gpu_cache_usage_perc",
    "time_per_output_token_seconds",
    "cpu_cache_usage_perc",
    "num_requests_swapped",
)


def test_every_planned_dashboard_is_built() -> None:
    assert sorted(DASHBOARD_NAMES) == sorted(DASHBOARDS)


def test_committed_build_is_current() -> None:
    assert stale(BUILD) == [], "dashboards/build is stale: run `servescope dashboards build`"


@pytest.mark.parametrize("name", DASHBOARD_NAMES)
def test_dashboard_shape(name: str) -> None:
    dashboard = built()[name]
    assert dashboard["uid"] == f"servescope-{name}" and len(dashboard["uid"]) <= 40
    assert dashboard["schemaVersion"] == SCHEMA_VERSION
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    links = {link["url"] if "url" in link else link.get("uri") for link in dashboard["links"]}
    for other in DASHBOARDS:
        assert any(f"/d/servescope-{other}" in str(link) for link in links), f"no link to {other}"
    assert any("/runbooks" in str(link) for link in links)
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    cells: set[tuple[int, int]] = set()
    for panel in panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        area = {
            (x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def _unit(panel: dict[str, Any]) -> str | None:
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    return unit or panel.get("yAxis", {}).get("format") or panel.get("format")


def test_every_panel_has_a_unit_and_seconds_are_seconds() -> None:
    for name, dashboard in built().items():
        for panel in panels(dashboard):
            unit = _unit(panel)
            assert unit, f"{name}: panel {panel['title']!r} has no unit"
            exprs = [t["expr"] for t in panel.get("targets", [])]
            # A latency quantile or a *_seconds gauge is in seconds: shown as `s`, never as ms.
            if exprs and all(re.search(r"histogram_quantile\(.*_seconds_bucket", e) for e in exprs):
                assert unit == "s", f"{name}: {panel['title']!r} shows seconds as {unit}"


@pytest.mark.parametrize(("name", "title", "expr"), list(queries()), ids=lambda v: str(v)[:60])
def test_query_is_sound(name: str, title: str, expr: str) -> None:
    for removed in REMOVED:
        assert removed not in expr, f"removed vLLM name {removed}"
    assert "vllm:" not in expr, "dashboards read the normalised servescope_* names only"
    metrics = exported_metrics()
    tree = parse_promql(expand(expr))
    for node, enclosing in walk(tree):
        if isinstance(node, Selector) and is_counter(node.name, metrics, set()):
            metric = node.name
            assert enclosing is not None and enclosing.name in ("rate", "increase", "irate"), (
                f"{title}: counter {metric} outside rate/increase"
            )
    for match in re.finditer(r"histogram_quantile\(\s*[\d.]+\s*,\s*(\w+)", expr):
        assert match.group(1) == "sum", f"{title}: histogram_quantile not over sum by (le)"
    for match in re.finditer(r"histogram_quantile\([^,]+,\s*sum (by|without) \(([^)]*)\)", expr):
        if match.group(1) == "by":
            assert "le" in [x.strip() for x in match.group(2).split(",")], f"{title}: sum by without le"
