"""The real tools: promtool imports the series, Prometheus evaluates the committed rules' expressions.

Recording rules are inlined into the alert expressions, not backfilled: a reference to a record becomes
its expression, a range over a record (`record[1d]`) a subquery at the evaluation step, and a record
read `offset D` the last value of a subquery over the lookback delta, which is what an instant
selector sees of a series recorded every step. Backfilling with `promtool tsdb create-blocks-from
rules` would need one pass per level of records (the daily KV baseline reads the 5-minute one) and a
Prometheus restart after each.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from servescope.core.durations import parse_duration
from servescope.core.processes import Child, ChildFailedError, free_port

LOOKBACK = "1m"  # backfilled series carry no staleness markers: a vanished series lingers this long
READY_SECONDS = 60.0


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str  # with every recording rule inlined
    for_s: float
    severity: str
    keep_s: float = 0.0  # keep_firing_for


def load_rules(path: Path) -> tuple[list[AlertRule], dict[str, str]]:
    """The alerts of a Prometheus rule file, records inlined, and the records themselves."""
    doc = yaml.safe_load(path.read_text())
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    records = {rule["record"]: rule["expr"] for rule in rules if "record" in rule}
    alerts = [
        AlertRule(
            rule["alert"],
            inline(rule["expr"], records),
            parse_duration(rule.get("for", "0s")),
            rule.get("labels", {}).get("severity", ""),
            parse_duration(rule.get("keep_firing_for", "0s")),
        )
        for rule in rules
        if "alert" in rule
    ]
    return alerts, records


def inline(expr: str, records: dict[str, str], step: str = "30s") -> str:
    """`expr` with every reference to a recording rule replaced by what the rule evaluates."""
    if not records:
        return expr
    names = "|".join(re.escape(name) for name in sorted(records, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w:])({names})(?![\w:])(\{{[^}}]*\}})?(\[[^\]]+\])?(\s+offset\s+\w+)?")

    def replace(match: re.Match[str]) -> str:
        if match.group(2):
            # A matcher on a record's own labels would need rewriting the record's expression.
            raise ValueError(f"cannot inline {match.group(0)!r}: label matchers on a record")
        body = inline(records[match.group(1)], records, step)
        window, offset = match.group(3), match.group(4) or ""
        if window:
            return f"({body}){window[:-1]}:{step}]{offset}"
        if offset:
            return f"last_over_time(({body})[{LOOKBACK}:{step}]{offset})"
        return f"({body})"

    return pattern.sub(replace, expr)


def create_blocks(openmetrics: Path, out: Path, promtool: str = "promtool") -> None:
    """Import one OpenMetrics file into TSDB blocks under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool on {openmetrics.name}: {done.stderr.strip() or done.stdout.strip()}")


class Prometheus:
    """A Prometheus over an existing TSDB directory, scraping nothing, answering queries on loopback."""

    def __init__(self, data: Path, binary: str = "prometheus") -> None:
        self.data = data
        self.binary = shutil.which(binary) or binary
        self.port = free_port()
        self.log = data.parent / "prometheus.log"
        self.child: Child | None = None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.child.process if self.child is not None else None

    def __enter__(self) -> Prometheus:
        config = self.data.parent / "prometheus.yml"
        config.write_text(yaml.safe_dump({"global": {"evaluation_interval": "30s"}}))
        argv = [
            self.binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data}",
            "--storage.tsdb.retention.time=10y",  # blocks older than the newest by this much go
            f"--query.lookback-delta={LOOKBACK}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--query.max-samples=200000000",
        ]
        self.child = Child("prometheus", argv, self.log)
        self.child.start()
        try:
            self.child.wait_ready(f"http://127.0.0.1:{self.port}/-/ready", READY_SECONDS)
        except ChildFailedError as exc:
            self.child.stop()
            raise RuntimeError(str(exc)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.stop(grace=20.0)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """The matrix `expr` evaluates to: [{"metric": labels, "values": [[t, "v"], ...]}, ...]."""
        form = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v1/query_range", data=form)
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"query {expr[:80]!r}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr[:80]!r}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result
