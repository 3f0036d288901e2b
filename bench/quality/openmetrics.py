"""Scrapes in, one OpenMetrics file out: what `promtool tsdb create-blocks-from openmetrics` reads.

Each scrape's exposition gets the labels Prometheus would attach (`instance`, `job`) and the scrape's
timestamp. promtool wants every family in one block, with its samples in time order, so lines are
buffered per sample name and written name by name. No `# TYPE` lines: the TSDB keeps no types, and
without them every sample name is its own family (a `_bucket` needs no histogram header). Only the
names the rules read are kept, which keeps the files and the import small; `up` is added at every
scrape, as Prometheus records it for a target that answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_NAME = re.compile(r"\b(servescope_[a-zA-Z0-9_]+)")


def names_read_by(expressions: Iterable[str]) -> frozenset[str]:
    """Every servescope series name the expressions select, and `up`."""
    found = {"up"}
    for expr in expressions:
        found.update(_NAME.findall(expr))
    return frozenset(found)


class SeriesBuffer:
    """Collects scrapes of one target; `write` emits them as OpenMetrics with timestamps."""

    def __init__(self, instance: str, keep: frozenset[str] | None = None, job: str = "servescope") -> None:
        self._target = f'instance="{instance}",job="{job}"'
        self._keep = keep
        self._lines: dict[str, list[str]] = {}
        self.samples = 0

    def retarget(self, instance: str, job: str = "servescope") -> None:
        """The target's labels from now on (a pod moved: Prometheus scrapes a new `instance`)."""
        self._target = f'instance="{instance}",job="{job}"'

    def add(self, body: str, timestamp: float) -> None:
        """One scrape's text exposition (format 0.0.4) taken at unix time `timestamp`."""
        ts = f" {timestamp:.3f}\n"
        target = self._target
        self._append("up", f"up{{{target}}} 1{ts}")
        for line in body.splitlines():
            if not line or line[0] == "#":
                continue
            brace, space = line.find("{"), line.find(" ")
            if 0 <= brace < space:
                name = line[:brace]
                rendered = f"{name}{{{target},{line[brace + 1 :]}{ts}"
            else:
                name = line[:space]
                rendered = f"{name}{{{target}}}{line[space:]}{ts}"
            if self._keep is None or name in self._keep:
                self._append(name, rendered)

    def add_failed(self, timestamp: float) -> None:
        """A scrape that got no answer: Prometheus records `up` 0 and nothing else."""
        self._append("up", f"up{{{self._target}}} 0 {timestamp:.3f}\n")

    def _append(self, name: str, line: str) -> None:
        lines = self._lines.get(name)
        if lines is None:
            self._lines[name] = [line]
        else:
            lines.append(line)
        self.samples += 1

    def write(self, path: Path) -> None:
        with path.open("w") as out:
            for name in sorted(self._lines):
                out.writelines(self._lines[name])
            out.write("# EOF\n")
