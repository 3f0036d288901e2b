"""Push the built dashboards to Grafana over its HTTP API (`servescope dashboards push`).

Ensures the folder (`GET /api/folders/<uid>`, created by `POST /api/folders` on 404), then imports each
`*.json` of the build folder with `POST /api/dashboards/db`. Without `--overwrite` an import never replaces
a dashboard someone changed in Grafana: Grafana answers 412 (`version-mismatch`, `name-exists`, ...) and
that dashboard is reported and skipped; the others are still tried. The token comes from the environment
only and is never printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from servescope.core.errors import ServescopeError

# The first one set wins: the servescope-specific name, then the generic one.
TOKEN_VARIABLES = ("SERVESCOPE_GRAFANA_TOKEN", "GRAFANA_TOKEN")
TIMEOUT_SECONDS = 15.0
_UID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
# Grafana's 412 statuses on import, in words.
_CONFLICTS = {
    "version-mismatch": "Grafana holds another version of it (changed there, or pushed from another build)",
    "name-exists": "another dashboard in the folder already has this title",
    "plugin-dashboard": "a plugin provides a dashboard with this uid",
}


class PushError(ServescopeError):
    """A failure that stops the whole push (no token, no folder, bad credentials, Grafana unreachable)."""

    reason = "push_failed"


@dataclass
class Outcome:
    file: str
    title: str
    ok: bool
    message: str


@dataclass
class Report:
    folder_created: bool = False
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def pushed(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(not o.ok for o in self.outcomes)


def token_from_env(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    for name in TOKEN_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    raise PushError(
        f"no Grafana token: set {TOKEN_VARIABLES[1]} (or {TOKEN_VARIABLES[0]}) to a service account "
        "token with the Editor role on the folder; it is read from the environment only, never from "
        "the command line"
    )


def folder_uid(folder: str) -> str:
    """A Grafana uid for the folder name: letters, digits, - and _, at most 40 characters."""
    uid = _UID_UNSAFE.sub("-", folder.strip()).strip("-")[:40]
    if not uid:
        raise PushError(f"--folder {folder!r}: needs at least one letter or digit")
    return uid


def _message(response: httpx.Response) -> tuple[str, str]:
    """Grafana's (`status`, `message`) from an error body, tolerating bodies that are not JSON."""
    try:
        body = response.json()
    except ValueError:
        return "", response.text.strip()[:200]
    if not isinstance(body, dict):
        return "", str(body)[:200]
    return str(body.get("status") or ""), str(body.get("message") or "")


class Pusher:
    def __init__(self, grafana_url: str, token: str, *, client: httpx.Client | None = None) -> None:
        url = grafana_url.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", url):
            raise PushError(f"--grafana-url {grafana_url!r}: expected http(s)://HOST[:PORT][/PATH]")
        self.url = url
        self._token = token
        self.client = client or httpx.Client(
            base_url=url + "/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=TIMEOUT_SECONDS,
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "<token>") if self._token else text

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            reason = self._scrub(str(exc)) or type(exc).__name__
            raise PushError(
                f"cannot reach Grafana at {self.url} ({method} /{path}): {reason}; "
                "check --grafana-url and that Grafana is reachable from here"
            ) from None
        if response.status_code in (401, 403):
            _, message = _message(response)
            what = "rejected the token" if response.status_code == 401 else "refused access"
            said = self._scrub(message) or "no message"
            variables = " or ".join(TOKEN_VARIABLES)
            raise PushError(
                f"authentication failed: Grafana at {self.url} {what} (HTTP {response.status_code}: {said}) "
                f"on {method} /{path}; check that {variables} holds a valid service account token "
                "with the Editor role on the folder"
            )
        return response

    def ensure_folder(self, folder: str) -> tuple[str, bool]:
        """The folder's uid, and whether it had to be created."""
        uid = folder_uid(folder)
        found = self._request("GET", f"api/folders/{uid}")
        if found.status_code == 200:
            return uid, False
        if found.status_code != 404:
            _, message = _message(found)
            raise PushError(
                f"folder {uid!r}: Grafana answered HTTP {found.status_code} ({self._scrub(message)})"
            )
        created = self._request("POST", "api/folders", json={"uid": uid, "title": folder})
        if created.status_code not in (200, 201):
            _, message = _message(created)
            raise PushError(
                f"folder {folder!r} (uid {uid}): cannot create it, HTTP {created.status_code} "
                f"({self._scrub(message)}); a folder with this title but another uid may already exist: "
                "choose another --folder, or rename that folder in Grafana"
            )
        return uid, True

    def _pushed_to(self, response: httpx.Response) -> str:
        """Where Grafana says the dashboard now is, and its version."""
        try:
            result = response.json()
        except ValueError:
            result = {}
        # Grafana's url is a path that already holds any sub-path it is served under.
        where = str(httpx.URL(self.url).join(result["url"])) if result.get("url") else self.url
        version = result.get("version")
        return where + (f" (version {version})" if version is not None else "")

    def push_one(self, path: Path, uid: str, overwrite: bool) -> Outcome:
        try:
            dashboard = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            return Outcome(path.name, path.stem, False, f"{path}: not a dashboard JSON file ({exc})")
        if not isinstance(dashboard, dict) or "panels" not in dashboard:
            return Outcome(path.name, path.stem, False, f"{path}: not a dashboard (no panels)")
        title = str(dashboard.get("title") or path.stem)
        name = f"{title!r} ({path.name}, uid {dashboard.get('uid')})"
        dashboard["id"] = None  # import by uid; an id would address another instance's dashboard
        body = {
            "dashboard": dashboard,
            "folderUid": uid,
            "message": f"servescope dashboards push: {path.name}",
            "overwrite": overwrite,
        }
        response = self._request("POST", "api/dashboards/db", json=body)
        status, message = _message(response)
        message = self._scrub(message)
        if response.status_code == 200:
            return Outcome(path.name, title, True, f"pushed {name} -> {self._pushed_to(response)}")
        if response.status_code == 412:
            kind = status or "precondition failed"
            why = _CONFLICTS.get(kind, "Grafana refused to replace what it holds")
            return Outcome(
                path.name,
                title,
                False,
                f"not pushed: {name}: {why} (HTTP {response.status_code} {kind}: {message or 'no message'}). "
                "Pass --overwrite to replace it with this build",
            )
        return Outcome(
            path.name,
            title,
            False,
            f"not pushed: {name}: HTTP {response.status_code} "
            f"({status or 'error'}: {message or 'no message'})",
        )


def _print(text: str, is_error: bool) -> None:
    print(text, file=sys.stderr if is_error else sys.stdout)


def dashboard_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PushError(
            f"{directory}: no such folder; run `servescope dashboards build --out {directory}` first"
        )
    files = sorted(directory.glob("*.json"))
    if not files:
        raise PushError(
            f"{directory}: no *.json dashboards; run `servescope dashboards build --out {directory}`"
        )
    return files


def push(
    grafana_url: str,
    token: str,
    folder: str,
    directory: Path,
    *,
    overwrite: bool = False,
    echo: Callable[[str, bool], None] | None = None,
    client: httpx.Client | None = None,
) -> Report:
    """Push every dashboard of `directory`; PushError for a failure that stops the push.

    `echo(text, is_error)` reports each step as it happens.
    """
    echo = echo or _print
    files = dashboard_files(directory)
    pusher = Pusher(grafana_url, token, client=client)
    try:
        uid, created = pusher.ensure_folder(folder)
        report = Report(folder_created=created)
        echo(f"{'created' if created else 'using'} folder {folder!r} (uid {uid}) in {pusher.url}", False)
        for path in files:
            outcome = pusher.push_one(path, uid, overwrite)
            report.outcomes.append(outcome)
            echo(outcome.message, not outcome.ok)
        return report
    finally:
        if client is None:
            pusher.client.close()
