"""`servescope dashboards push` against a local fake of Grafana's folder and dashboard import API."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from servescope.bundle.dashboards.build import write
from servescope.cli import app, register_subcommands
from tests.support.http_fakes import QuietHandler, loopback_http

register_subcommands()  # the CLI imports subcommands when they run; these tests drive them directly

TOKEN = "glsa_secret-token-for-tests_0123456789"
TOKEN_VARIABLES = ("GRAFANA_TOKEN", "SERVESCOPE_GRAFANA_TOKEN")


@dataclass
class Request:
    method: str
    path: str
    authorization: str
    body: Any


@dataclass
class FakeGrafana:
    """Folders and dashboards by uid; 412 version-mismatch for a known uid unless overwrite is true."""

    url: str = ""
    token: str = TOKEN
    requests: list[Request] = field(default_factory=list)
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, path: str, authorization: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append(Request(method, path, authorization, body))
            if authorization != f"Bearer {self.token}":
                return 401, {"message": "invalid API key", "traceID": ""}
            if method == "GET" and path.startswith("/api/folders/"):
                uid = path.removeprefix("/api/folders/")
                if uid in self.folders:
                    return 200, self.folders[uid]
                return 404, {"message": "folder not found", "status": "not-found"}
            if method == "POST" and path == "/api/folders":
                if body["uid"] in self.folders:
                    return 409, {"message": "a folder with the same uid already exists"}
                self.folders[body["uid"]] = {
                    "uid": body["uid"],
                    "title": body["title"],
                    "id": len(self.folders) + 1,
                }
                return 200, self.folders[body["uid"]]
            if method == "POST" and path == "/api/dashboards/db":
                return self.import_dashboard(body)
            return 404, {"message": "not found"}

    def import_dashboard(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        dashboard = body["dashboard"]
        if body.get("folderUid") not in self.folders:
            return 400, {"message": "folder not found", "status": "folder-not-found"}
        uid = dashboard["uid"]
        known = self.dashboards.get(uid)
        if known is not None and not body.get("overwrite"):
            message = "The dashboard has been changed by someone else"
            return 412, {"message": message, "status": "version-mismatch"}
        version = known["version"] + 1 if known else 1
        self.dashboards[uid] = {**dashboard, "version": version, "folderUid": body["folderUid"]}
        return 200, {"id": 1, "uid": uid, "url": f"/d/{uid}/x", "status": "success", "version": version}

    def posts(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == "POST" and r.path == path]


def _handler(fake: FakeGrafana) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            status, payload = fake.handle(method, self.path, self.headers.get("Authorization", ""), body)
            self.reply(status, json.dumps(payload).encode(), "application/json")

    return Handler


@pytest.fixture
def grafana() -> Iterator[FakeGrafana]:
    fake = FakeGrafana()
    with loopback_http(_handler(fake)) as url:
        fake.url = url
        yield fake


def _dashboard(uid: str, title: str) -> dict[str, Any]:
    return {"uid": uid, "title": title, "id": None, "version": 1, "panels": [], "schemaVersion": 39}


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A build folder: three dashboards, plus files that are not dashboards and must be left alone."""
    out = tmp_path / "build"
    out.mkdir()
    for name, title in [
        ("alpha", "servescope / Alpha"),
        ("beta", "servescope / Beta"),
        ("gamma", "servescope / Gamma"),
    ]:
        (out / f"{name}.json").write_text(json.dumps(_dashboard(f"servescope-{name}", title)))
    (out / "provisioning.yaml").write_text("apiVersion: 1\n")
    (out / "configmap-alpha.yaml").write_text("kind: ConfigMap\n")
    return out


def run(
    *args: str, token: str | None = TOKEN, variable: str = "GRAFANA_TOKEN", monkeypatch: pytest.MonkeyPatch
) -> Result:
    for name in TOKEN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if token is not None:
        monkeypatch.setenv(variable, token)
    result = CliRunner().invoke(app, ["dashboards", "push", *args])
    assert TOKEN not in result.output, "the token must never be printed"
    return result


@pytest.mark.e2e
def test_happy_path_creates_the_folder_once_and_posts_every_dashboard(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run("--grafana-url", grafana.url, "--dir", str(built), monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert "pushed 3, failed 0" in result.output

    assert grafana.folders == {"servescope": {"uid": "servescope", "title": "servescope", "id": 1}}
    assert len(grafana.posts("/api/folders")) == 1
    imports = grafana.posts("/api/dashboards/db")
    assert [r.body["dashboard"]["uid"] for r in imports] == [
        "servescope-alpha",
        "servescope-beta",
        "servescope-gamma",
    ]
    for request in imports:
        assert request.body["folderUid"] == "servescope"
        assert request.body["overwrite"] is False
        assert request.body["message"]
        assert request.body["dashboard"]["id"] is None
    assert all(r.authorization == f"Bearer {TOKEN}" for r in grafana.requests)

    # A second push finds the folder and does not create it again.
    run("--grafana-url", grafana.url, "--dir", str(built), "--overwrite", monkeypatch=monkeypatch)
    assert len(grafana.posts("/api/folders")) == 1


def _folder_with_beta_at_version_4(grafana: FakeGrafana) -> None:
    """Grafana already holds servescope's folder and the Beta dashboard, at version 4."""
    grafana.folders["servescope"] = {"uid": "servescope", "title": "servescope", "id": 1}
    beta = _dashboard("servescope-beta", "servescope / Beta")
    grafana.dashboards["servescope-beta"] = {**beta, "version": 4}


@pytest.mark.e2e
def test_an_existing_dashboard_is_reported_by_name_and_the_rest_still_pushed(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _folder_with_beta_at_version_4(grafana)

    result = run("--grafana-url", grafana.url, "--dir", str(built), monkeypatch=monkeypatch)

    assert result.exit_code == 1
    assert "servescope / Beta" in result.output
    assert "beta.json" in result.output
    assert "version-mismatch" in result.output
    assert "--overwrite" in result.output
    assert "pushed 2, failed 1" in result.output
    assert not grafana.posts("/api/folders"), "an existing folder is not created again"
    assert len(grafana.posts("/api/dashboards/db")) == 3, "every dashboard is tried"
    assert grafana.dashboards["servescope-beta"]["version"] == 4, "the existing one is left as it was"


@pytest.mark.e2e
def test_overwrite_replaces_existing_dashboards(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _folder_with_beta_at_version_4(grafana)

    result = run("--grafana-url", grafana.url, "--dir", str(built), "--overwrite", monkeypatch=monkeypatch)

    assert result.exit_code == 0, result.output
    assert "pushed 3, failed 0" in result.output
    assert all(r.body["overwrite"] is True for r in grafana.posts("/api/dashboards/db"))
    assert grafana.dashboards["servescope-beta"]["version"] == 5


@pytest.mark.e2e
def test_custom_folder_and_the_other_token_variable(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(
        "--grafana-url",
        grafana.url + "/",
        "--dir",
        str(built),
        "--folder",
        "GPU serving",
        variable="SERVESCOPE_GRAFANA_TOKEN",
        monkeypatch=monkeypatch,
    )
    assert result.exit_code == 0, result.output
    assert grafana.folders["GPU-serving"]["title"] == "GPU serving"
    assert {r.body["folderUid"] for r in grafana.posts("/api/dashboards/db")} == {"GPU-serving"}


@pytest.mark.e2e
def test_wrong_token_gives_an_authentication_message(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "glsa_wrong-token_9876543210"
    result = run("--grafana-url", grafana.url, "--dir", str(built), token=wrong, monkeypatch=monkeypatch)

    assert result.exit_code == 1
    assert "authentication failed" in result.output
    assert "401" in result.output
    assert "GRAFANA_TOKEN" in result.output
    assert wrong not in result.output
    assert not grafana.posts("/api/dashboards/db"), "nothing is pushed with a rejected token"


@pytest.mark.e2e
def test_missing_token_is_refused_naming_the_variable(
    grafana: FakeGrafana, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run("--grafana-url", grafana.url, "--dir", str(built), token=None, monkeypatch=monkeypatch)

    assert result.exit_code == 1
    assert "servescope: error: " in result.output and "GRAFANA_TOKEN" in result.output
    assert not grafana.requests, "no request is sent without a token"


@pytest.mark.e2e
def test_unreachable_grafana_names_the_url(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"

    result = run("--grafana-url", url, "--dir", str(built), monkeypatch=monkeypatch)

    assert result.exit_code == 1
    assert "cannot reach Grafana" in result.output
    assert url in result.output
    assert "Traceback" not in result.output


@pytest.mark.e2e
def test_an_empty_or_missing_build_folder_says_to_build_first(
    grafana: FakeGrafana, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for directory in (tmp_path / "missing", tmp_path):
        result = run("--grafana-url", grafana.url, "--dir", str(directory), monkeypatch=monkeypatch)
        assert result.exit_code == 1
        assert "servescope dashboards build" in result.output
    assert not grafana.requests


@pytest.mark.e2e
def test_the_real_build_pushes(grafana: FakeGrafana, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path)
    built = sorted(p.stem for p in tmp_path.glob("*.json"))

    result = run("--grafana-url", grafana.url, "--dir", str(tmp_path), monkeypatch=monkeypatch)

    assert result.exit_code == 0, result.output
    assert sorted(uid.removeprefix("servescope-") for uid in grafana.dashboards) == built
    for dashboard in grafana.dashboards.values():
        assert dashboard["title"].startswith("servescope / ")
        assert dashboard["folderUid"] == "servescope"
