"""After start-up, the demo checks what it relies on, so it never runs while showing nothing.

Prometheus must report every rule group of the generated rule file loaded, and this demo's
Alertmanager among those it sends alerts to; Alertmanager must have loaded the generated configuration
(the webhook receiver posting to this demo's runbook service with this demo's token file); and the
runbook service must accept the token in that file. Each check gives one line naming what failed, or
None.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from servescope.bundle.alerts.alertmanager import WEBHOOK
from servescope.runbooks.webhook import WEBHOOK_PATH

HTTP_TIMEOUT_SECONDS = 5.0
# Prometheus reports ready once its configuration is applied, and finds Alertmanager within seconds;
# the margin covers a busy machine.
SETTLE_SECONDS = 30.0


class StackCheckError(RuntimeError):
    """A started part of the demo does not do what the demo relies on; the message is one line."""


def rule_group_names(rules: Path) -> list[str]:
    """The group names of a Prometheus rule file, in file order."""
    document = yaml.safe_load(rules.read_text())
    return [str(group["name"]) for group in document.get("groups") or []]


def check_rules(prometheus_url: str, expected: list[str]) -> str | None:
    """None when Prometheus's /api/v1/rules lists every group in `expected`."""
    try:
        response = httpx.get(prometheus_url + "/api/v1/rules", timeout=HTTP_TIMEOUT_SECONDS)
        response.raise_for_status()
        loaded = {group["name"] for group in response.json()["data"]["groups"]}
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return f"Prometheus at {prometheus_url}: /api/v1/rules unreadable ({_short(exc)})"
    missing = [name for name in expected if name not in loaded]
    if missing:
        return (
            f"Prometheus at {prometheus_url} loaded {len(loaded)} of the {len(expected)} rule groups; "
            f"missing: {', '.join(missing)}"
        )
    return None


def check_prometheus_sends(prometheus_url: str, alertmanager_url: str) -> str | None:
    """None when Prometheus lists `alertmanager_url` among the Alertmanagers it sends alerts to."""
    try:
        response = httpx.get(prometheus_url + "/api/v1/alertmanagers", timeout=HTTP_TIMEOUT_SECONDS)
        response.raise_for_status()
        active = [am["url"] for am in response.json()["data"]["activeAlertmanagers"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return f"Prometheus at {prometheus_url}: /api/v1/alertmanagers unreadable ({_short(exc)})"
    if not any(url.startswith(alertmanager_url + "/") for url in active):
        return f"Prometheus at {prometheus_url} sends alerts to no Alertmanager at {alertmanager_url}"
    return None


def check_alertmanager(alertmanager_url: str, webhook_url: str, token_file: Path) -> str | None:
    """None when Alertmanager's loaded config has the webhook receiver, posting to `webhook_url` with
    the bearer token read from `token_file`."""
    where = f"Alertmanager at {alertmanager_url}"
    try:
        response = httpx.get(alertmanager_url + "/api/v2/status", timeout=HTTP_TIMEOUT_SECONDS)
        response.raise_for_status()
        config = yaml.safe_load(response.json()["config"]["original"])
        receivers = {r["name"]: r for r in config.get("receivers") or []}
    except (httpx.HTTPError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        return f"{where}: /api/v2/status unreadable ({_short(exc)})"
    if WEBHOOK not in receivers:
        return f"{where}: loaded config has no {WEBHOOK} receiver"
    hooks: list[dict[str, Any]] = receivers[WEBHOOK].get("webhook_configs") or []
    if not any(hook.get("url") == webhook_url for hook in hooks):
        return f"{where}: the {WEBHOOK} receiver does not post to {webhook_url}"
    files = {hook.get("http_config", {}).get("authorization", {}).get("credentials_file") for hook in hooks}
    if str(token_file) not in files:
        return f"{where}: the {WEBHOOK} receiver does not read its token from {token_file}"
    return None


def check_webhook_token(webhook_url: str, token_file: Path) -> str | None:
    """None when the runbook service accepts the token in `token_file` (an empty notification, which
    makes no incident)."""
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        return f"webhook token file {token_file}: unreadable ({exc.strerror})"
    if not token:
        return f"webhook token file {token_file}: empty"
    try:
        response = httpx.post(
            webhook_url,
            json={"version": "4", "alerts": []},
            headers={"Authorization": f"Bearer {token}"},
            timeout=HTTP_TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        return f"runbook service at {webhook_url}: unreachable ({_short(exc)})"
    if response.status_code != 200:
        return f"runbook service at {webhook_url} answers {response.status_code} to the token in {token_file}"
    return None


def verify_stack(urls: dict[str, str], rules: Path, token_file: Path, *, settle: float | None = None) -> str:
    """Run every check (retrying for `settle` seconds while one fails); a one-line summary, or
    StackCheckError naming the first check that still fails."""
    webhook_url = urls["runbooks"] + WEBHOOK_PATH
    groups = rule_group_names(rules)
    checks: list[Callable[[], str | None]] = [lambda: check_webhook_token(webhook_url, token_file)]
    if "prometheus" in urls:
        checks += [
            lambda: check_rules(urls["prometheus"], groups),
            lambda: check_prometheus_sends(urls["prometheus"], urls["alertmanager"]),
            lambda: check_alertmanager(urls["alertmanager"], webhook_url, token_file),
        ]
    deadline = time.monotonic() + (SETTLE_SECONDS if settle is None else settle)
    for check in checks:
        while (failure := check()) is not None:
            if time.monotonic() >= deadline:
                raise StackCheckError(failure)
            time.sleep(0.5)
    if "prometheus" not in urls:
        return "verified: the runbook service accepts the webhook token"
    return (
        f"verified: Prometheus loaded all {len(groups)} rule groups and sends to Alertmanager, which "
        "posts to the runbook service with the token it accepts"
    )


def _short(exc: Exception) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]
