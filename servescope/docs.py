"""README tables generated from the settings classes and the metric catalog, so they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from servescope.catalog import CATALOG
from servescope.common.settings_cli import cli_flag, env_names
from servescope.exporter.dcgm.counters import load_counters, specs_of
from servescope.runbooks.settings import RUNBOOK_AREAS
from servescope.serve import SERVE_AREAS

AREAS = (*SERVE_AREAS, *RUNBOOK_AREAS)  # every settings area: the exporter's, then the runbook service's

_REGION = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(.*?)(<!-- END GENERATED: (?P=name) -->)", re.DOTALL
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    rows = ["| flag | environment variable | default | description |", "| --- | --- | --- | --- |"]
    for area in AREAS:
        for name, info in area.model_fields.items():
            env = " or ".join(f"`{e}`" for e in env_names(area, name))
            default = info.default
            shown = f"`{default}`" if default not in ("", None) else "(empty)"
            flag = f"`{cli_flag(area, name)}`"
            rows.append(f"| {flag} | {env} | {shown} | {_cell(info.description or '')} |")
    return "\n".join(rows) + "\n"


def metrics_table() -> str:
    rows = ["| metric | type | labels | source | meaning |", "| --- | --- | --- | --- | --- |"]
    for spec in (*CATALOG, *specs_of(load_counters())):
        labels = ", ".join(spec.labels) or "-"
        rows.append(f"| `{spec.name}` | {spec.kind.value} | {labels} | {spec.source} | {_cell(spec.help)} |")
    return "\n".join(rows) + "\n"


def alerts_table() -> str:
    from servescope.alerts.bundle import groups  # alerts/ is mapped into the package
    from servescope.alerts.config import AlertsConfig
    from servescope.alerts.model import Alert

    rows = ["| alert | severity | for | group | what it means |", "| --- | --- | --- | --- | --- |"]
    for group in groups(AlertsConfig()):
        for rule in group.rules:
            if isinstance(rule, Alert):
                cells = (f"`{rule.name}`", rule.severity, rule.for_, group.name, _cell(rule.summary))
                rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"


def dashboards_table() -> str:
    import json

    from servescope.dashboards.build import names, render_all  # dashboards/ is mapped into the package

    files = render_all()
    rows = ["| dashboard | uid | panels |", "| --- | --- | --- |"]
    for name in names():
        data = json.loads(files[f"{name}.json"])
        titles = ", ".join(_cell(panel["title"]) for panel in data["panels"])
        rows.append(f"| {_cell(data['title'])} | `{data['uid']}` | {titles} |")
    return "\n".join(rows) + "\n"


GENERATORS = {
    "settings": settings_table,
    "metrics": metrics_table,
    "alerts": alerts_table,
    "dashboards": dashboards_table,
}


def render_readme(text: str) -> str:
    """Replace every generated region of the README with fresh content."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            raise ValueError(f"README: unknown generated region {name!r}")
        return match.group(1) + GENERATORS[name]() + match.group(4)

    return _REGION.sub(fill, text)


def update_readme(path: Path, check: bool = False) -> bool:
    """Rewrite the README's generated regions; with `check`, only report whether they are current."""
    text = path.read_text()
    fresh = render_readme(text)
    if check:
        return fresh == text
    if fresh != text:
        path.write_text(fresh)
    return True
