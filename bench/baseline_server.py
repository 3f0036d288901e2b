"""The baseline: the same samples rendered per request by prometheus_client's generate_latest.

It serves, behind the same uvicorn/FastAPI stack as servescope, an exposition captured from a running
servescope. A custom collector yields fresh metric families on every scrape (client_python's pattern),
so the difference measured is exactly render-per-request versus pre-rendered bytes.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector


class ReplayCollector(Collector):
    def __init__(self, text: str) -> None:
        self._families = [
            (
                family.name,
                family.type,
                family.documentation,
                [(s.name, dict(s.labels), s.value) for s in family.samples],
            )
            for family in text_string_to_metric_families(text)
        ]

    def collect(self) -> Iterator[Metric]:
        for name, kind, doc, samples in self._families:
            labels = sorted({k for _, lab, _ in samples for k in lab})
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
                name, doc, labels=labels
            )
            for _, lab, value in samples:
                family.add_metric([lab.get(k, "") for k in labels], value)
            yield family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("exposition", type=Path)
    args = parser.parse_args()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReplayCollector(args.exposition.read_text()))
    app = FastAPI()

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")

    @app.get("/readyz")
    async def ready() -> dict[str, bool]:
        return {"ready": True}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"baseline serving on 127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])


if __name__ == "__main__":
    main()
