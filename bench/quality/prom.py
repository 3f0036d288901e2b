"""The real tools over recorded series: promtool imports OpenMetrics into TSDB blocks, and a Prometheus
over those blocks answers range queries (the dashboards' and the load replay's tests read history so).
The alert-quality benchmark judges rules with promtool's rule engine instead (`rule_engine.py`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from servescope.core.processes import Child, ChildFailedError, free_port

LOOKBACK = "1m"  # backfilled series carry no staleness markers: a vanished series lingers this long
READY_SECONDS = 60.0


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
