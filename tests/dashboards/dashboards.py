"""The built dashboards and their queries, as the tests read them."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from servescope.bundle.dashboards import BUILD_DIR as DASHBOARDS_BUILD
from servescope.bundle.dashboards.build import names, render_all

ROOT = Path(__file__).resolve().parents[2]
BUILD = DASHBOARDS_BUILD
# How Grafana would expand the variables for "All" and a short range.
VARIABLES = {"$__rate_interval": "30s", "$__interval": "15s", "$__range": "5m"}
ALL = ".*"


def built() -> dict[str, dict[str, Any]]:
    files = render_all()
    return {name: json.loads(files[f"{name}.json"]) for name in names()}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # rows may nest panels


def queries() -> Iterator[tuple[str, str, str]]:
    """(dashboard, panel title, expr) for every target of every panel."""
    for name, dashboard in built().items():
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                yield name, panel["title"], target["expr"]


def expand(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    return re.sub(r"\$(\w+)", ALL, expr)


def fault_only() -> set[str]:
    """Exprs the dashboards declare as having data only in a fault scenario (FAULT_ONLY lists)."""
    found: set[str] = set()
    for name in names():
        module = importlib.import_module(f"servescope.bundle.dashboards.boards.{name.replace('-', '_')}")
        found |= set(getattr(module, "FAULT_ONLY", []))
    return found
