"""Row I (exporter): HEAD answered where GET is; the API schema and its pages only when asked."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.faults.exporter import exporter

pytestmark = pytest.mark.e2e

BASE_ARGS = ("--no-nvml", "--no-dcgm", "--no-discovery")
DOC_PATHS = ("/docs", "/redoc", "/openapi.json")


def test_head_is_answered_like_get_without_a_body(tmp_path: Path) -> None:
    with exporter(*BASE_ARGS, log=tmp_path / "log") as served:
        for path in ("/metrics", "/healthz", "/readyz", "/", "/api/v1/sources"):
            got = served.get(path)
            head = httpx.head(f"{served.base}{path}", timeout=5)
            assert head.status_code == got.status_code, path
            assert head.content == b"", path
            assert head.headers["content-type"] == got.headers["content-type"], path
        assert httpx.post(f"{served.base}/healthz", timeout=5).status_code == 405


def test_api_docs_are_off_unless_asked(tmp_path: Path) -> None:
    with exporter(*BASE_ARGS, log=tmp_path / "off") as served:
        assert [served.get(path).status_code for path in DOC_PATHS] == [404, 404, 404]
    with exporter(*BASE_ARGS, "--api-docs", log=tmp_path / "on") as served:
        assert [served.get(path).status_code for path in DOC_PATHS] == [200, 200, 200]
        assert "/metrics" not in served.get("/openapi.json").json()["paths"]  # include_in_schema=False
