"""The import table of docs/architecture.md, read from the import graph itself (grimp, as the contracts).

`python scripts/import_table.py` rewrites the region between the IMPORT GRAPH markers; `--check` exits 1
when the committed table is not what the code imports (tests/docs/test_architecture.py runs it).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "architecture.md"
REGION = re.compile(r"(<!-- BEGIN IMPORT GRAPH -->\n)(.*?)(<!-- END IMPORT GRAPH -->)", re.DOTALL)
# Folders shown one level deeper: a product's or the core's own parts.
SPLIT = {"core", "exporter", "bundle", "runbooks", "kit"}
# The simulator's distribution (sim/): shown with what it imports of servescope; nothing imports it.
SIMULATOR = "servescope_sim"


def unit_of(module: str, packages: set[str]) -> str:
    """`servescope.kit.load.client` -> `kit/load`; a product's own top-level modules -> `exporter`;
    `servescope_sim.demo.stack` -> `servescope_sim/demo`."""
    if module.split(".", maxsplit=1)[0] == SIMULATOR:
        return f"{SIMULATOR}/demo" if module.startswith(f"{SIMULATOR}.demo") else SIMULATOR
    parts = module.split(".")[1:]
    if not parts:
        return "servescope"
    if parts[0] in SPLIT and len(parts) >= 2 and ".".join(module.split(".")[:3]) in packages:
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def table() -> str:
    graph = grimp.build_graph("servescope", SIMULATOR, cache_dir=None)
    packages = {m.rsplit(".", 1)[0] for m in graph.modules}
    edges: dict[str, set[str]] = defaultdict(set)
    for importer in graph.modules:
        source = unit_of(importer, packages)
        edges.setdefault(source, set())
        for imported in graph.find_modules_directly_imported_by(importer):
            target = unit_of(imported, packages)
            if target not in {source, "servescope"}:
                edges[source].add(target)
    edges.pop("servescope", None)
    lines = ["| folder or module | imports (directly) |", "| --- | --- |"]
    for source in sorted(edges):
        lines.append(f"| `{source}` | {', '.join(sorted(edges[source])) or '—'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = DOCUMENT.read_text()
    if not REGION.search(text):
        print(f"{DOCUMENT}: no IMPORT GRAPH region", file=sys.stderr)
        return 2
    fresh = REGION.sub(lambda m: m.group(1) + table() + m.group(3), text)
    if "--check" in argv:
        if fresh != text:
            print(f"{DOCUMENT.name}: the import table is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
