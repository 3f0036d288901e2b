"""The real Prometheus rule engine over generated series: `promtool test rules`, and what it fired.

promtool evaluates every rule group of a rule file at each evaluation step over the input series (the
code Prometheus runs: `for`, `keep_firing_for`, the recording rules' order, staleness), and writes the
`ALERTS` and `ALERTS_FOR_STATE` series as Prometheus does. One query at the end reads every firing
episode back from them: ALERTS_FOR_STATE's value is the time an alert became active, the same through
one pending-then-firing episode and new for the next, so counting its values (`count_values`) over a
subquery yields one series per episode, whose first and last firing steps are the minimum and maximum of
`timestamp()`. promtool prints what such a query returned when the expected result differs (it is
given an impossible one), which is how the answer comes back.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from servescope.core.durations import parse_duration

FIRING = (
    'count_values without () ("active_at", ALERTS_FOR_STATE and ignoring (alertstate) '
    'ALERTS{alertstate="firing"})'
)
# A result no query returns: promtool then prints what it got.
IMPOSSIBLE = [{"labels": '{impossible="1"}', "value": 0}]
_GOT = re.compile(r"^\s+got: (.*)$", re.MULTILINE)
_SAMPLE = re.compile(r'\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\} ([-+0-9.eEInfNa]+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Fired:
    """One firing episode of an alert, as the rule engine produced it (seconds from the series' start)."""

    alert: str
    labels: Labels  # without alertname
    active_at: float
    first: float
    last: float


def promtool_env() -> dict[str, str]:
    """The environment promtool evaluates in: Go's collector run a quarter as often (GOGC=400, unless
    GOGC is set), which cuts a fifth of the CPU of these long evaluations for a larger heap."""
    return {**os.environ, "GOGC": os.environ.get("GOGC", "400")}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        raise RuntimeError("promtool not installed: `make tools` installs Debian's prometheus")
    return found


def run(
    rules: Path,
    series: list[dict[str, Any]],
    duration: float,
    work: Path,
    *,
    interval: str = "30s",
    chunk_steps: int = 120,
) -> list[Fired]:
    """Every firing episode of every alert in `rules` over `series` (promtool input series sampled every
    `interval`, evaluated every `interval`) from 0 to `duration` seconds.

    promtool's query engine loads at most 10,000 samples per query: the episodes are read back in chunks of
    `chunk_steps` evaluations (halved while a chunk holds too many alerts), and merged.
    """
    while True:
        try:
            return _run(rules, series, duration, work, interval=interval, chunk_steps=chunk_steps)
        except TooManySamplesError:
            if chunk_steps <= 2:
                raise
            chunk_steps //= 2


class TooManySamplesError(RuntimeError):
    pass


def _run(
    rules: Path, series: list[dict[str, Any]], duration: float, work: Path, *, interval: str, chunk_steps: int
) -> list[Fired]:
    queries = _queries(duration, interval, chunk_steps)
    test_file = work / "rule-engine.yaml"
    test_file.write_text(
        yaml.safe_dump(_document(rules, series, interval, queries), sort_keys=False, width=1 << 20)
    )
    done = subprocess.run(
        [promtool(), "test", "rules", str(test_file)],
        env=promtool_env(),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    report = done.stdout + done.stderr
    if "too many samples" in report:
        raise TooManySamplesError(f"promtool on {test_file}: a chunk of {chunk_steps} steps loads too many")
    answers = _GOT.findall(report)
    if len(answers) != len(queries) or "no file match" in report or "rule: " in report:
        raise RuntimeError(f"promtool on {test_file}: {report[-3000:]}")
    firsts: dict[Labels, float] = {}
    lasts: dict[Labels, float] = {}
    for i in range(0, len(answers), 2):
        for labels, value in samples(answers[i]).items():
            firsts[labels] = min(value, firsts.get(labels, math.inf))
        for labels, value in samples(answers[i + 1]).items():
            lasts[labels] = max(value, lasts.get(labels, -math.inf))
    return episodes(firsts, lasts)


def _queries(duration: float, interval: str, chunk_steps: int) -> list[tuple[str, str]]:
    """(query, eval time) pairs: the first and last firing step of each episode, chunk by chunk."""
    span = parse_duration(interval) * chunk_steps
    ends = [min(duration, span * (i + 1)) for i in range(math.ceil(duration / span))]
    window = f"{int(span)}s"
    return [
        (f"{kind}_over_time((timestamp({FIRING}))[{window}:{interval}])", f"{int(end)}s")
        for end in ends
        for kind in ("min", "max")
    ]


def _document(
    rules: Path, series: list[dict[str, Any]], interval: str, queries: list[tuple[str, str]]
) -> dict[str, Any]:
    """promtool's test file: the rules in the bundle's group order, the series, the queries."""
    return {
        "rule_files": [str(rules.resolve())],
        "evaluation_interval": interval,
        "group_eval_order": [group["name"] for group in yaml.safe_load(rules.read_text())["groups"]],
        "tests": [
            {
                "interval": interval,
                "input_series": series,
                "promql_expr_test": [
                    {"expr": query, "eval_time": at, "exp_samples": IMPOSSIBLE} for query, at in queries
                ],
            }
        ],
    }


def samples(text: str) -> dict[Labels, float]:
    """promtool's printed result (`{a="b", c="d"} 1.5E+02, ...`, or `nil`) as labels -> value."""
    found: dict[Labels, float] = {}
    for match in _SAMPLE.finditer(text):
        labels = tuple(sorted((k, _unquote(v)) for k, v in _LABEL.findall(match.group(1))))
        found[labels] = float(match.group(2))
    return found


def _unquote(value: str) -> str:
    return value.encode().decode("unicode_escape") if "\\" in value else value


def episodes(firsts: dict[Labels, float], lasts: dict[Labels, float]) -> list[Fired]:
    found = []
    for labels, first in firsts.items():
        named = dict(labels)
        alert, active = named.pop("alertname"), float(named.pop("active_at"))
        rest = tuple(sorted(named.items()))
        found.append(Fired(alert, rest, active, first, lasts.get(labels, first)))
    return sorted(found, key=lambda f: (f.first, f.alert, f.labels))


def values(samples_by_step: list[float | None]) -> str:
    """promtool's expanding notation for one series: a value per step, `_` where there is none, and
    `stale` where the series stopped (Prometheus writes a staleness marker at the first missed scrape)."""
    parts: list[str] = []
    previous: float | None = None
    for value in samples_by_step:
        if value is None:
            parts.append("stale" if previous is not None else "_")
        elif math.isnan(value):
            parts.append("NaN")
        else:
            parts.append(_number(value))
        previous = value
    return " ".join(_compress(parts))


def _number(value: float) -> str:
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _compress(parts: list[str]) -> list[str]:
    """Runs of one value as `v x n` (n + 1 samples), runs of `_` as `_x n`: promtool's shorthand."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        j = i
        # promtool expands only numbers (and `_`): Inf, NaN and stale are written one by one.
        while (
            j + 1 < len(parts)
            and parts[j + 1] == parts[i]
            and parts[i] not in ("stale", "Inf", "-Inf", "NaN")
        ):
            j += 1
        run = j - i + 1
        if run == 1:
            out.append(parts[i])
        elif parts[i] == "_":
            out.append(f"_x{run}")
        else:
            out.append(f"{parts[i]}x{run - 1}")
        i = j + 1
    return out


def seconds(duration: str) -> float:
    return parse_duration(duration)


def series(name: str, labels: dict[str, str], samples_by_step: list[float | None]) -> dict[str, Any]:
    """One promtool input series."""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values(samples_by_step)}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
