"""What every dashboard shares: the datasource and filter variables, selectors, panel factories, links.

Panels are laid out by `layout()` (two per row unless a width is given), so no two panels overlap and
ids are stable. Thresholds drawn on panels, and the runbook link, come from the alert config a dashboard is
built with (`dashboard(cfg)` of each module of `boards/`), the one place they are set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grafanalib.core as g

from servescope.core.config import AlertsConfig

DATASOURCE = "${datasource}"
GRID_WIDTH = 24
PANEL_HEIGHT = 8

# Dashboards by file name: uid "servescope-<name>"; every dashboard links to all of them.
DASHBOARDS = {
    "fleet": "GPU fleet",
    "serving-slo": "Serving SLO",
    "gpu-memory": "GPU memory",
    "batching": "Batching efficiency",
    "interconnect": "Interconnect",
    "health": "servescope health",
    "load": "Load test",
}
# Filters: every GPU query carries GPU, every engine query ENGINE (Grafana expands the variables).
GPU = 'hostname=~"$hostname", gpu=~"$gpu"'
ENGINE = 'model_name=~"$model_name"'
HOST = 'hostname=~"$hostname"'
RATE = "[$__rate_interval]"
# One engine: endpoints are node-local URLs (127.0.0.1:8000 on every node), so instance keeps them apart.
BY_ENGINE = "instance, model_name, engine, endpoint"


def m(metric: str, *matchers: str) -> str:
    """`metric{matchers}` (empty braces dropped)."""
    inner = ", ".join(x for x in matchers if x)
    return f"{metric}{{{inner}}}" if inner else metric


def rate(metric: str, *matchers: str) -> str:
    """The per-second rate of `metric` on the selected engines."""
    return f"rate({m(metric, ENGINE, *matchers)}{RATE})"


def gpu_rate(metric: str, *matchers: str) -> str:
    """The per-second rate of `metric` on the selected GPUs."""
    return f"rate({m(metric, GPU, *matchers)}{RATE})"


# The legends of per-GPU and per-engine series.
ON_GPU = "{{hostname}} GPU {{gpu}}"
ENGINE_LEGEND = "{{model_name}} {{instance}} {{endpoint}} [{{engine}}]"


def per_gpu(*metrics: str, legends: Sequence[str] = ("",)) -> list[tuple[str, str]]:
    """One target per metric on the selected GPUs, legended by host and GPU (and its word in `legends`)."""
    return [
        (m(metric, GPU), f"{ON_GPU} {legend}" if legend else ON_GPU)
        for metric, legend in zip(metrics, legends, strict=True)
    ]


def per_quantile(
    expr: Callable[[float], str], quantiles: Sequence[float], legend: str = ""
) -> list[tuple[str, str]]:
    """One target per quantile, `expr(q)` legended `<legend>p50`, `<legend>p99`..."""
    return [(expr(q), f"{legend}p{q * 100:g}") for q in quantiles]


def per_engine(metric: str) -> list[tuple[str, str]]:
    """The metric of the selected engines, one series an engine."""
    return [(m(metric, ENGINE), ENGINE_LEGEND)]


@dataclass
class Panel:
    """A panel before layout: what grafanalib needs, plus the width it wants."""

    kind: str  # timeseries | stat | heatmap
    title: str
    targets: list[tuple[str, str]]  # (expr, legend)
    unit: str
    description: str = ""
    width: int = 12
    height: int = PANEL_HEIGHT
    thresholds: list[float] = field(default_factory=list)  # alert thresholds drawn as red lines
    extra: dict[str, Any] = field(default_factory=dict)
    instant: bool = False


def ts(title: str, targets: Sequence[tuple[str, str]], unit: str, **kwargs: Any) -> Panel:
    return Panel("timeseries", title, list(targets), unit, **kwargs)


def stat(title: str, targets: Sequence[tuple[str, str]], unit: str, **kwargs: Any) -> Panel:
    return Panel("stat", title, list(targets), unit, instant=True, **kwargs)


def count_stat(title: str, count: str, legend: str, *, alarm: bool = True, **kwargs: Any) -> Panel:
    """A stat of a count that reads 0, not "no data", when nothing matches; red from 1 when `alarm`."""
    return stat(title, [(f"{count} or vector(0)", legend)], "none", thresholds=[1] if alarm else [], **kwargs)


def heatmap(title: str, expr: str, unit: str, *, legend: str = "{{le}}", **kwargs: Any) -> Panel:
    """A heatmap of histogram buckets (`format: heatmap`) or of series (GPUs x time)."""
    return Panel("heatmap", title, [(expr, legend)], unit, **kwargs)


def _steps(thresholds: Sequence[float]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": "red", "value": value} for value in thresholds]
    return steps


def _build(panel: Panel, pos: g.GridPos) -> Any:
    targets = [
        g.Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + i), instant=panel.instant)
        for i, (expr, legend) in enumerate(panel.targets)
    ]
    common: dict[str, Any] = {
        "title": panel.title,
        "dataSource": DATASOURCE,
        "targets": targets,
        "gridPos": pos,
        "description": panel.description,
    }
    if panel.kind == "timeseries":
        return g.TimeSeries(
            **common,
            unit=panel.unit,
            thresholds=_steps(panel.thresholds),
            thresholdsStyleMode="line" if panel.thresholds else "off",
            legendDisplayMode="table",
            legendCalcs=["lastNotNull", "max"],
            tooltipMode="multi",
            extraJson=panel.extra or None,
        )
    if panel.kind == "stat":
        return g.Stat(
            **common, format=panel.unit, thresholds=_steps(panel.thresholds), reduceCalc="lastNotNull"
        )
    for target in targets:
        target.format = "heatmap" if "_bucket" in target.expr else "time_series"
    return g.Heatmap(
        **common,
        dataFormat="tsbuckets" if any(t.format == "heatmap" for t in targets) else "timeseries",
        extraJson={"yAxis": {"format": panel.unit}, **panel.extra} if panel.unit else panel.extra or None,
    )


def layout(panels: Sequence[Panel]) -> list[Any]:
    """Place panels left to right, top to bottom, in rows of GRID_WIDTH."""
    built, x, y, row_height = [], 0, 0, 0
    for panel in panels:
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        built.append(_build(panel, g.GridPos(h=panel.height, w=panel.width, x=x, y=y)))
        x += panel.width
        row_height = max(row_height, panel.height)
    return built


def _variable(name: str, label: str, query: str, all_value: str | None = ".*") -> g.Template:
    """A multi-value filter; "All" matches everything (`.*`), or with `all_value` None the values offered."""
    return g.Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=True,
        multi=True,
        allValue=all_value,
        default="All",
        refresh=2,
        sort=3,
    )


def variables(*names: str, fleet: Sequence[str] = ()) -> list[g.Template]:
    """The datasource variable, a variable per label of the fleet (the config's fleet_by, e.g. cluster:
    where one Grafana sees several fleets), then the named filters (hostname, gpu, model_name), each
    offering only the values within the fleets chosen."""
    chosen = [f'{label}=~"${label}"' for label in fleet]
    gpus, engines = "servescope_gpu_info", "servescope_serving_kv_cache_usage_ratio"
    # Within chosen fleets, "All" is the nodes (models) offered, not every one: the panels stay in them.
    within = ".*" if not fleet else None
    found = {
        "hostname": _variable("hostname", "Node", f"label_values({m(gpus, *chosen)}, hostname)", within),
        "gpu": _variable("gpu", "GPU", f"label_values({m(gpus, *chosen, HOST)}, gpu)", within),
        "model_name": _variable(
            "model_name", "Model", f"label_values({m(engines, *chosen)}, model_name)", within
        ),
    }
    fleets = [_variable(label, label, f"label_values({gpus}, {label})") for label in fleet] if names else []
    datasource = g.Template(name="datasource", label="Prometheus", query="prometheus", type="datasource")
    return [datasource, *fleets, *(found[n] for n in names)]


def uid(name: str) -> str:
    return f"servescope-{name}"


def links(runbook_base_url: str) -> list[g.DashboardLink]:
    out = [
        g.DashboardLink(
            title=title, type="link", uri=f"/d/{uid(name)}", keepTime=True, includeVars=True, icon="dashboard"
        )
        for name, title in DASHBOARDS.items()
    ]
    out.append(
        g.DashboardLink(
            title="Runbooks", type="link", uri=f"{runbook_base_url}/runbooks", targetBlank=True, icon="doc"
        )
    )
    return out


def make_dashboard(
    cfg: AlertsConfig,
    name: str,
    description: str,
    panels: Sequence[Panel],
    *,
    filters: Sequence[str],
) -> g.Dashboard:
    """The dashboard `name` of DASHBOARDS (its title there), with the filters, links and layout all share."""
    return g.Dashboard(
        title=f"servescope / {DASHBOARDS[name]}",
        uid=uid(name),
        description=description,
        tags=["servescope"],
        panels=layout(panels),
        templating=g.Templating(list=variables(*filters, fleet=cfg.fleet_by)),
        links=links(cfg.runbook_base_url),
        time=g.Time("now-1h", "now"),
        refresh="30s",
        graphTooltip=1,
    ).auto_panel_ids()
