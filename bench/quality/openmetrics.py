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


class StepBuffer:
    """Scrapes of one target, one per evaluation step, as promtool input series (`rule_engine.py`).

    A series a scrape lacks has no sample at that step; the first such step after a sample is a staleness
    marker, as Prometheus writes when a series goes or the target stops answering. `up` is added at every
    scrape, 0 for one that got no answer (and nothing else then).
    """

    def __init__(self, instance: str, keep: frozenset[str] | None = None, job: str = "servescope") -> None:
        self._target = f'instance="{instance}",job="{job}"'
        self._keep = keep
        self._values: dict[str, list[float | None]] = {}
        self.steps = 0
        self.samples = 0

    def _put(self, key: str, step: int, value: float) -> None:
        values = self._values.get(key)
        if values is None:
            values = self._values[key] = []
        values.extend([None] * (step + 1 - len(values)))
        values[step] = value
        self.samples += 1

    def add(self, body: str, step: int) -> None:
        """The scrape at evaluation step `step` (its time is step x the evaluation interval)."""
        self.steps = max(self.steps, step + 1)
        target = self._target
        self._put(f"up{{{target}}}", step, 1.0)
        for line in body.splitlines():
            if not line or line[0] == "#":
                continue
            brace, space = line.find("{"), line.rfind(" ")
            if 0 <= brace < space:
                name, key = line[:brace], f"{line[:brace]}{{{target},{line[brace + 1 : space]}"
            else:
                name, key = line[:space], f"{line[:space]}{{{target}}}"
            if self._keep is None or name in self._keep:
                self._put(key, step, float(line[space + 1 :]))

    def add_failed(self, step: int) -> None:
        self.steps = max(self.steps, step + 1)
        self._put(f"up{{{self._target}}}", step, 0.0)

    def add_constant(self, key: str, value: float, steps: int) -> None:
        """A series every step (kube-state-metrics' facts about the node, say)."""
        for step in range(steps):
            self._put(key, step, value)

    def input_series(self) -> list[dict[str, str]]:
        from .rule_engine import values

        series = []
        for key, recorded in sorted(self._values.items()):
            padded = recorded + [None] * (self.steps - len(recorded))
            series.append({"series": key, "values": values(padded)})
        return series
