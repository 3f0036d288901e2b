"""Pages per incident, judged by a real Alertmanager loaded with the bundle's configuration.

Each run's firing episodes (what promtool's rule engine fired) are replayed into the Alertmanager in
order: at every moment the set of firing alerts changes, the alerts firing then are posted (and those
that stopped, resolved), and the pager receiver's groups are read back with each alert's status: the
grouping (the route's `group_by`) and the inhibitions are Alertmanager's own. A page is a pager group
that gets an alert no inhibition mutes: what a pager integration (PagerDuty's dedup key is the group key)
opens an incident for. A group whose alerts all resolved opens a new one if it stays so for a
`group_interval` (Alertmanager sends the resolution at its next flush; before it, a new alert continues
the same notification thread).
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from servescope.core.durations import parse_duration
from servescope.core.processes import Child, free_port

from .evaluate import HEARTBEAT, Episode, RunOutcome, explains

PAGER = "pager"


def api(url: str, body: Any = None, timeout: float = 10.0) -> Any:
    """A call to Alertmanager's API v2: GET, or POST of `body` as JSON; the JSON answer, if any."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST" if data else "GET"
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        text = answer.read()
    return json.loads(text) if text.strip() else None


@dataclass(frozen=True)
class Page:
    scenario: str
    seed: int
    at: float  # run seconds
    group: tuple[tuple[str, str], ...]  # the pager group's labels
    alerts: tuple[Episode, ...]  # its alerts not muted when it opened


@dataclass
class Alertmanager:
    """prometheus-alertmanager with the bundle's configuration, its webhooks pointed at a closed port."""

    config: Path
    work: Path
    url: str = ""
    child: Child | None = None
    group_interval_s: float = field(default=300.0)

    def __enter__(self) -> Alertmanager:
        document = yaml.safe_load(self.config.read_text())
        token = self.work / "token"
        token.write_text("bench\n")
        for receiver in document["receivers"]:
            for hook in receiver.get("webhook_configs", []):
                hook["url"] = f"http://127.0.0.1:{free_port()}/closed"
                hook["http_config"]["authorization"]["credentials_file"] = str(token)
        route = next(r for r in document["route"]["routes"] if r["receiver"] == PAGER)
        self.group_interval_s = parse_duration(
            route.get("group_interval", document["route"]["group_interval"])
        )
        path = self.work / "alertmanager.yaml"
        path.write_text(yaml.safe_dump(document))
        port = free_port()
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "alertmanager"
        argv = [
            binary,
            f"--config.file={path}",
            f"--storage.path={self.work / 'alertmanager-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
        self.url = f"http://127.0.0.1:{port}"
        self.child = Child("alertmanager", argv, self.work / "alertmanager.log")
        self.child.start()
        self.child.wait_ready(f"{self.url}/-/ready", 30.0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.stop()

    def _request(self, path: str, body: Any = None) -> Any:
        return api(self.url + path, body)

    def post(self, firing: list[dict[str, str]], resolved: list[dict[str, str]]) -> None:
        now = datetime.now(UTC)
        alerts = [
            {"labels": labels, "startsAt": (now - timedelta(hours=1)).isoformat(), "endsAt": ends.isoformat()}
            for batch, ends in ((firing, now + timedelta(hours=1)), (resolved, now - timedelta(seconds=1)))
            for labels in batch
        ]
        if alerts:
            self._request("/api/v2/alerts", alerts)

    def pager_groups(self, expected: int) -> list[dict[str, Any]]:
        """The pager's groups once all `expected` alerts are in them, and stable (inhibition settles)."""
        deadline, previous = time.monotonic() + 10, None
        while True:
            groups = [g for g in self._request("/api/v2/alerts/groups") if g["receiver"]["name"] == PAGER]
            seen = sum(len(g["alerts"]) for g in groups)
            state = sorted(
                (json.dumps(g["labels"], sort_keys=True), a["fingerprint"], a["status"]["state"])
                for g in groups
                for a in g["alerts"]
            )
            if (seen == expected and state == previous) or time.monotonic() > deadline:
                return groups
            previous = state
            time.sleep(0.05)


def _labels(episode: Episode) -> dict[str, str]:
    return {"alertname": episode.alert, **dict(episode.labels)}


def replay(am: Alertmanager, run: RunOutcome) -> list[Page]:
    """The pages of one run, in time order."""
    episodes = [e for e in run.episodes if e.alert != HEARTBEAT]
    moments = sorted({e.start for e in episodes} | {e.end + 1.0 for e in episodes})
    pages: list[Page] = []
    closed_at: dict[Key, float] = {}  # a group seen without an active alert, since when
    open_groups: set[Key] = set()
    posted: set[Episode] = set()
    for at in moments:
        firing = {e for e in episodes if e.start <= at <= e.end}
        am.post([_labels(e) for e in firing], [_labels(e) for e in posted - firing])
        posted = firing
        active = _active_groups(am, [e for e in firing if e.severity == "critical"])
        for key, alerts in active.items():
            if key in open_groups:
                continue
            if key not in closed_at or at - closed_at[key] >= am.group_interval_s:
                pages.append(Page(run.scenario, run.seed, at, key, alerts))
            open_groups.add(key)
        for key in open_groups - set(active):
            open_groups.discard(key)
            closed_at[key] = at
    am.post([], [_labels(e) for e in posted])
    return pages


Key = tuple[tuple[str, str], ...]


def _active_groups(am: Alertmanager, critical: list[Episode]) -> dict[Key, tuple[Episode, ...]]:
    """The pager's groups with an alert no inhibition mutes, and those alerts."""
    by_labels = {json.dumps(_labels(e), sort_keys=True): e for e in critical}
    found: dict[Key, tuple[Episode, ...]] = {}
    for group in am.pager_groups(len(critical)):
        alerts = tuple(
            by_labels[key]
            for a in group["alerts"]
            if a["status"]["state"] == "active"
            and (key := json.dumps(a["labels"], sort_keys=True)) in by_labels
        )
        if alerts:
            found[tuple(sorted(group["labels"].items()))] = alerts
    return found


def per_incident(run: RunOutcome, pages: list[Page]) -> tuple[dict[str, int], list[Page]]:
    """Pages per incident (by name, every window of it) and the pages no incident explains."""
    counts: dict[str, int] = {
        w.incident: 0 for w in run.windows if w.expect and not w.incident.endswith("(relaxed)")
    }
    false: list[Page] = []
    for page in pages:
        explained = {
            w.incident.removesuffix(" (relaxed)") for w in run.windows for e in page.alerts if explains(w, e)
        }
        if not explained:
            false.append(page)
        for name in explained & set(counts):
            counts[name] += 1
    return counts, false
