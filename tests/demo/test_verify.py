"""The demo's start-up checks: each names what failed, and a failed check stops the whole stack.

Each check's negative cases talk to a fake HTTP server answering like a misconfigured Prometheus,
Alertmanager or runbook service would; with the real binaries, the checks pass from a relative state
directory, and a Prometheus that loaded no rule (the fresh-clone bug) stops `servescope demo` with one
line naming it."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import yaml
from typer.testing import CliRunner

from servescope.bundle.alerts.alertmanager import WEBHOOK
from servescope.bundle.alerts.bundle import groups
from servescope.core.config import AlertsConfig
from servescope.runbooks.webhook import WEBHOOK_PATH
from servescope_sim.demo import stack as stack_module
from servescope_sim.demo import verify as verify_module
from servescope_sim.demo.cli import demo as demo_command
from servescope_sim.demo.configs import ConfigFiles, Ports, write_configs
from servescope_sim.demo.stack import DemoOptions, DemoStack, find_binaries
from servescope_sim.demo.verify import (
    StackCheckError,
    check_alertmanager,
    check_prometheus_sends,
    check_rules,
    check_webhook_token,
    rule_group_names,
    verify_stack,
)
from tests.runbook.fakes import FakeHttp, Recorded, fake_http

PORTS = Ports(exporter=19108, runbooks=19110, prometheus=19090, alertmanager=19093)


class Answers:
    """What the fake server answers: path -> (status, JSON body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any]] = {}

    def __call__(self, request: Recorded) -> tuple[int, Any]:
        return self.routes.get(request.path, (404, {"error": "not found"}))


@pytest.fixture
def fake() -> Iterator[tuple[str, Answers, FakeHttp]]:
    answers = Answers()
    with fake_http(answers) as server:
        yield server.base, answers, server


def _rules_answer(*names: str) -> tuple[int, Any]:
    return 200, {"status": "success", "data": {"groups": [{"name": n, "rules": []} for n in names]}}


def _status_answer(config: dict[str, Any]) -> tuple[int, Any]:
    return 200, {"config": {"original": yaml.safe_dump(config)}, "versionInfo": {}}


def test_rule_groups_missing_from_prometheus_are_named(fake: tuple[str, Answers, FakeHttp]) -> None:
    base, answers, _ = fake
    answers.routes["/api/v1/rules"] = _rules_answer("servescope-meta")
    failure = check_rules(base, ["servescope-gpu-health", "servescope-meta"])
    assert failure == (f"Prometheus at {base} loaded 1 of the 2 rule groups; missing: servescope-gpu-health")
    answers.routes["/api/v1/rules"] = _rules_answer()  # what a relative rule_files path gave
    assert "loaded 0 of the 2 rule groups" in (check_rules(base, ["a", "servescope-meta"]) or "")
    answers.routes["/api/v1/rules"] = _rules_answer("servescope-gpu-health", "servescope-meta", "other")
    assert check_rules(base, ["servescope-gpu-health", "servescope-meta"]) is None
    answers.routes["/api/v1/rules"] = (500, {"error": "boom"})
    assert "/api/v1/rules unreadable" in (check_rules(base, ["a"]) or "")


def test_prometheus_sending_to_no_alertmanager_or_another_one_is_named(
    fake: tuple[str, Answers, FakeHttp],
) -> None:
    base, answers, _ = fake
    ours = "http://127.0.0.1:19093"

    def active(*urls: str) -> tuple[int, Any]:
        found = [{"url": url} for url in urls]
        return 200, {"status": "success", "data": {"activeAlertmanagers": found, "droppedAlertmanagers": []}}

    answers.routes["/api/v1/alertmanagers"] = active()
    assert check_prometheus_sends(base, ours) == (
        f"Prometheus at {base} sends alerts to no Alertmanager at {ours}"
    )
    answers.routes["/api/v1/alertmanagers"] = active("http://127.0.0.1:190930/api/v2/alerts")
    assert check_prometheus_sends(base, ours) is not None
    answers.routes["/api/v1/alertmanagers"] = active(ours + "/api/v2/alerts")
    assert check_prometheus_sends(base, ours) is None
    answers.routes["/api/v1/alertmanagers"] = (200, {"status": "success"})
    assert "/api/v1/alertmanagers unreadable" in (check_prometheus_sends(base, ours) or "")


def test_alertmanager_without_the_webhook_receiver_or_its_token_file_is_named(
    fake: tuple[str, Answers, FakeHttp], tmp_path: Path
) -> None:
    base, answers, _ = fake
    token = tmp_path / "token"
    hook_url = "http://127.0.0.1:19110" + WEBHOOK_PATH
    hook = {"url": hook_url, "http_config": {"authorization": {"credentials_file": str(token)}}}
    answers.routes["/api/v2/status"] = _status_answer({"receivers": [{"name": "null"}]})
    assert check_alertmanager(base, hook_url, token) == (
        f"Alertmanager at {base}: loaded config has no {WEBHOOK} receiver"
    )
    relative = {**hook, "http_config": {"authorization": {"credentials_file": "secrets/token"}}}
    answers.routes["/api/v2/status"] = _status_answer(
        {"receivers": [{"name": WEBHOOK, "webhook_configs": [relative]}]}
    )
    assert check_alertmanager(base, hook_url, token) == (
        f"Alertmanager at {base}: the {WEBHOOK} receiver does not read its token from {token}"
    )
    answers.routes["/api/v2/status"] = _status_answer(
        {"receivers": [{"name": WEBHOOK, "webhook_configs": [hook]}]}
    )
    assert check_alertmanager(base, hook_url, token) is None
    assert "does not post to http://elsewhere" in (check_alertmanager(base, "http://elsewhere", token) or "")
    answers.routes["/api/v2/status"] = (200, {"versionInfo": {}})
    assert "/api/v2/status unreadable" in (check_alertmanager(base, hook_url, token) or "")


def test_a_webhook_refusing_the_token_file_or_an_unreadable_file_is_named(
    fake: tuple[str, Answers, FakeHttp], tmp_path: Path
) -> None:
    base, answers, server = fake
    token = tmp_path / "token"
    url = base + WEBHOOK_PATH
    assert (
        check_webhook_token(url, token)
        == f"webhook token file {token}: unreadable (No such file or directory)"
    )
    token.write_text("\n")
    assert check_webhook_token(url, token) == f"webhook token file {token}: empty"
    token.write_text("s3cret\n")
    answers.routes[WEBHOOK_PATH] = (401, {"error": "unauthorized"})
    assert check_webhook_token(url, token) == f"runbook service at {url} answers 401 to the token in {token}"
    answers.routes[WEBHOOK_PATH] = (200, {"received": 0})
    assert check_webhook_token(url, token) is None
    posted = server.requests[-1]
    assert (posted.method, posted.path, posted.headers["Authorization"]) == (
        "POST",
        WEBHOOK_PATH,
        "Bearer s3cret",
    )
    assert json.loads(posted.body) == {"version": "4", "alerts": []}


def test_verify_stack_raises_one_line_naming_the_first_failed_check(
    fake: tuple[str, Answers, FakeHttp], tmp_path: Path
) -> None:
    base, answers, _ = fake
    files = write_configs(tmp_path, PORTS)
    answers.routes[WEBHOOK_PATH] = (200, {"received": 0})
    answers.routes["/api/v1/rules"] = _rules_answer()
    urls = {"runbooks": base, "prometheus": base, "alertmanager": base}
    with pytest.raises(StackCheckError) as raised:
        verify_stack(urls, files.rules, files.webhook_token, settle=0.0)
    message = str(raised.value)
    assert "\n" not in message
    expected = len(groups(AlertsConfig()))
    assert message.startswith(
        f"Prometheus at {base} loaded 0 of the {expected} rule groups; missing: servescope-"
    )
    assert rule_group_names(files.rules) == [g.name for g in groups(AlertsConfig())]


@pytest.mark.e2e
def test_a_failed_check_stops_every_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_module, "find_binaries", lambda: (None, None))

    def refuse(*args: object, **kwargs: object) -> str:
        raise StackCheckError("Prometheus at http://127.0.0.1:1 loaded 0 of the 7 rule groups")

    monkeypatch.setattr(stack_module, "verify_stack", refuse)
    demo = DemoStack(DemoOptions(scenario="steady", gpus=2, engines=1, state_dir=tmp_path / "s"), echo=print)
    with pytest.raises(StackCheckError, match="loaded 0 of the 7"):
        demo.start()
    assert demo.children and all(not child.running() for child in demo.children)


@pytest.mark.e2e
def test_real_prometheus_and_alertmanager_pass_the_checks_from_a_relative_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prometheus, alertmanager = find_binaries()
    if not (prometheus and alertmanager):
        pytest.fail("prometheus and prometheus-alertmanager are needed: `make test` installs them")
    monkeypatch.chdir(tmp_path)
    lines: list[str] = []
    demo = DemoStack(
        DemoOptions(scenario="steady", gpus=2, engines=1, state_dir=Path("rel")), echo=lines.append
    )
    try:
        demo.start()
        bundle = [g.name for g in groups(AlertsConfig())]
        verified = (
            f"      verified: Prometheus loaded all {len(bundle)} rule groups and sends to Alertmanager"
        )
        assert verified in "\n".join(lines)
        rules = httpx.get(demo.urls["prometheus"] + "/api/v1/rules", timeout=10).json()["data"]["groups"]
        assert sorted(g["name"] for g in rules) == sorted(bundle)
        loaded = yaml.safe_load((tmp_path / "rel" / "prometheus.yml").read_text())
        assert loaded["rule_files"] == [str(tmp_path.resolve() / "rel" / "rules.yaml")]
    finally:
        demo.stop()
    assert all(not child.running() for child in demo.children)


@pytest.mark.e2e
def test_prometheus_loading_no_rule_stops_the_demo_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug a fresh clone had: rule_files relative to the demo's folder, which Prometheus looks for
    under the config file's folder and silently does not find."""
    prometheus, alertmanager = find_binaries()
    if not (prometheus and alertmanager):
        pytest.fail("prometheus and prometheus-alertmanager are needed: `make test` installs them")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(verify_module, "SETTLE_SECONDS", 3.0)

    def relative_rule_files(state: Path, ports: Ports) -> ConfigFiles:
        files = write_configs(state, ports)
        config = yaml.safe_load(files.prometheus.read_text())
        config["rule_files"] = ["rel/rules.yaml"]
        files.prometheus.write_text(yaml.safe_dump(config))
        return files

    monkeypatch.setattr(stack_module, "write_configs", relative_rule_files)
    app = typer.Typer()
    app.command()(demo_command)
    previous = signal.getsignal(signal.SIGTERM)  # the command installs its own
    try:
        args = ["--scenario", "steady", "--gpus", "2", "--engines", "1", "--state-dir", "rel"]
        result = CliRunner().invoke(app, args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("servescope: error:")]
    assert (
        len(errors) == 1
        and f"loaded 0 of the {len(groups(AlertsConfig()))} rule groups; missing: servescope-" in errors[0]
    ), result.output
    assert not (tmp_path / "rel" / "urls.json").exists()  # never announced as running
    assert "stopping prometheus" in result.output and "stopping runbooks" in result.output
