"""Tables of the documents (README.md, DEVELOPING.md, docs/*.md) generated from the settings classes,
the metric catalog, the alert bundle and the dashboards, so they cannot drift."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic.fields import FieldInfo

from servescope.core.catalog import CATALOG
from servescope.core.dcgm.counters import load_counters, specs_of
from servescope.core.settings_cli import cli_flag, env_names
from servescope.exporter.serve import SERVE_AREAS
from servescope.runbooks.settings import RUNBOOK_AREAS

AREAS = (*SERVE_AREAS, *RUNBOOK_AREAS)  # every settings area: the exporter's, then the runbook service's

_REGION = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(.*?)(<!-- END GENERATED: (?P=name) -->)", re.DOTALL
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def default_shown(info: FieldInfo) -> str:
    """A setting's default as a user would write it: a factory's value, `true`/`false` (what the
    environment variable takes), a float without a needless `.0`, the choices of a Literal."""
    default = info.get_default(call_default_factory=True)
    if default in ("", None) or default == []:
        shown = "(empty)"
    elif isinstance(default, bool):
        shown = f"`{str(default).lower()}`"
    elif isinstance(default, float):
        shown = f"`{default:g}`"
    elif isinstance(default, list):
        shown = ", ".join(f"`{item}`" for item in default)
    else:
        shown = f"`{default}`"
    if typing.get_origin(info.annotation) is typing.Literal:
        shown += f" (of {', '.join(str(choice) for choice in typing.get_args(info.annotation))})"
    return shown


def settings_table() -> str:
    rows = ["| flag | environment variable | default | description |", "| --- | --- | --- | --- |"]
    for area in AREAS:
        for name, info in area.model_fields.items():
            env = " or ".join(f"`{e}`" for e in env_names(area, name))
            flag = f"`{cli_flag(area, name)}`"
            rows.append(f"| {flag} | {env} | {default_shown(info)} | {_cell(info.description or '')} |")
    return "\n".join(rows) + "\n"


def metrics_table() -> str:
    rows = ["| metric | type | labels | source | meaning |", "| --- | --- | --- | --- | --- |"]
    for spec in (*CATALOG, *specs_of(load_counters())):
        labels = ", ".join(spec.labels) or "-"
        rows.append(f"| `{spec.name}` | {spec.kind.value} | {labels} | {spec.source} | {_cell(spec.help)} |")
    return "\n".join(rows) + "\n"


def alerts_table() -> str:
    from servescope.bundle.alerts.doc_table import alerts_table as table  # alerts/ is mapped into the package

    return table()


def dashboards_table() -> str:
    import json

    from servescope.bundle.dashboards.build import names, render_all  # dashboards/ is mapped into the package

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


# Where the generated regions live: the README and every page beside it.
DOCUMENT_GLOBS = ("README.md", "DEVELOPING.md", "docs/*.md")


def documents(root: Path) -> list[Path]:
    """The Markdown documents of a checkout that may hold generated regions."""
    return [path for pattern in DOCUMENT_GLOBS for path in sorted(root.glob(pattern))]


def region_names(text: str) -> list[str]:
    """The names of the generated regions of a document, in order."""
    return [match.group("name") for match in _REGION.finditer(text)]


def render_regions(text: str, where: str = "README") -> str:
    """Replace every generated region of a document with fresh content."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated region {name!r}")
        return match.group(1) + GENERATORS[name]() + match.group(4)

    return _REGION.sub(fill, text)


def update_document(path: Path, check: bool = False) -> bool:
    """Rewrite a document's generated regions; with `check`, only report whether they are current."""
    text = path.read_text()
    fresh = render_regions(text, str(path))
    if check:
        return fresh == text
    if fresh != text:
        path.write_text(fresh)
    return True
