"""Every panel query, run by a real Prometheus over fifteen minutes of two simulated nodes' history.

One node plays `memory-leak` (so growth rates, exhaustion and the leak verdict exist), the other
`hardware-faults` (XIDs, NVLink CRC errors, PCIe replays, a lost GPU); both run the production
collectors on a fake clock and their scrapes are backfilled into Prometheus's TSDB with the recording
rules evaluated over them (history.py). Every query must succeed and return data at the last scrape;
queries the dashboards mark FAULT_ONLY must return data from the faulty node.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.quality.prom import Prometheus
from tests.dashboards.dashboards import built, expand, fault_only, queries
from tests.dashboards.history import END, START, backfill

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


class Answering:
    """The Prometheus over the backfilled history, asked at END (the instant of the last scrape)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> dict[str, Any]:
        response = httpx.get(f"{self.base}/api/v1/query", params={"query": expr, "time": END}, timeout=30)
        body: dict[str, Any] = response.json()
        return body

    def label_values(self, label: str, selector: str) -> dict[str, Any]:
        params = {"match[]": selector, "start": START, "end": END}
        body: dict[str, Any] = httpx.get(
            f"{self.base}/api/v1/label/{label}/values", params=params, timeout=30
        ).json()
        return body


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Answering]:
    for tool in ("prometheus", "promtool"):
        assert shutil.which(tool), (
            f"{tool} missing: `make test` installs Debian prometheus (scripts/install-debian-tools.sh)"
        )
    tsdb = backfill(tmp_path_factory.mktemp("dashboards"))
    with Prometheus(tsdb) as prom:
        yield Answering(prom.port)


QUERIES = sorted(set(queries()))


@pytest.mark.parametrize(("name", "title", "expr"), QUERIES, ids=lambda v: str(v)[:50])
def test_panel_query_returns_data(prometheus: Answering, name: str, title: str, expr: str) -> None:
    body = prometheus.query(expand(expr))
    assert body.get("status") == "success", f"{name} / {title}: {body.get('error')}"
    assert body["data"]["result"], f"{name} / {title}: no data for {expand(expr)}"


def test_fault_only_queries_have_data_from_the_faulty_node(prometheus: Answering) -> None:
    for expr in sorted(fault_only()):
        narrowed = expand(expr.replace('hostname=~"$hostname"', 'hostname="node-faults"'))
        assert prometheus.query(narrowed)["data"]["result"], f"no data in the fault scenario: {narrowed}"


def test_variable_queries_list_values(prometheus: Answering) -> None:
    for dashboard in built().values():
        for variable in dashboard["templating"]["list"]:
            query = variable.get("query")
            if not isinstance(query, str) or not query.startswith("label_values("):
                continue
            inner = query.removeprefix("label_values(").removesuffix(")")
            selector, label = (part.strip() for part in inner.rsplit(",", 1))
            response = prometheus.label_values(label, expand(selector))
            assert response["status"] == "success" and response["data"], f"{query}: no values"
