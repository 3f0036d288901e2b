"""The exporter's index page: served in the common HTML shell, with its links and what the data is."""

from __future__ import annotations

from fastapi.testclient import TestClient

from servescope import __version__
from servescope.exporter.app import create_app
from servescope.exporter.publisher import Publisher
from servescope.exporter.runtime import Runtime


def _index(simulated: bool) -> tuple[str, dict[str, str]]:
    runtime = Runtime(Publisher(simulated=simulated), simulated=simulated)
    response = TestClient(create_app(runtime, manage_runtime=False)).get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    return response.text, dict(response.headers)


def test_index_lists_the_endpoints_in_the_shell_with_its_security_headers() -> None:
    text, headers = _index(simulated=False)
    assert text.startswith(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>servescope</title>'
    )
    assert f"<h1>servescope {__version__}</h1><p>Real NVML.</p>" in text
    for path in (
        "/metrics",
        "/readyz",
        "/healthz",
        "/api/v1/sources",
        "/api/v1/gpus",
        "/api/v1/gpus/0/memory.svg",
    ):
        assert f'<a href="{path}">{path}</a>' in text
    assert text.endswith("</ul></body></html>")
    assert "script-src 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert "<script" not in text and "<style" not in text  # the runbook pages' style is theirs


def test_index_of_a_simulated_node_says_the_data_is_not_real() -> None:
    text, _ = _index(simulated=True)
    assert "<p>SIMULATED fleet: not real data.</p>" in text
    assert "Real NVML." not in text
