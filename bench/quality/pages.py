"""Pages per incident: the critical notifications the bundle's pager route would send, per cause.

Alertmanager groups the pager's alerts by `alertname, hostname` (the route's `group_by`): a group sends
a notification `group_wait` after its first alert fires, then at every `group_interval` tick at which
an alert joined it (a new series, or one that had resolved and fires again), and again after
`repeat_interval` while it stays firing; a notification lists the alerts firing and not muted at
that moment. A group ends when every alert in it has resolved; the next firing starts a new group.
Each run is one node. The bundle's inhibit rules are applied (`inhibit.py`): a critical alert muted by
another (the GPU lost mutes its XID) sends nothing while muted.

A page belongs to the incidents that explain one of the alerts it announces (see `evaluate.explains`);
a page that no incident explains is a false page. Target: one page per cause per node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from servescope.core.durations import parse_duration

from .evaluate import Episode, RunOutcome, explains
from .inhibit import Inhibition, load_inhibitions, unmuted

PAGE_SEVERITY = "critical"
PAGE_TARGET = 1


@dataclass(frozen=True)
class PagerTiming:
    group_by: tuple[str, ...]
    wait_s: float
    interval_s: float
    repeat_s: float
    inhibitions: tuple[Inhibition, ...] = ()
    step_s: float = 30.0  # the rule evaluation step of the episodes


@dataclass(frozen=True)
class Page:
    scenario: str
    seed: int
    alert: str
    at: float
    announces: tuple[Episode, ...]  # the alerts new in this notification (all of them on a repeat)
    reminder: bool = False  # sent again after repeat_interval, nothing new: not counted as a page


def pager_timing(alertmanager_yaml: Path) -> PagerTiming:
    """The pager route's grouping and timing, inherited from the root route where it sets none."""
    root = yaml.safe_load(alertmanager_yaml.read_text())["route"]
    pager = next(r for r in root["routes"] if r.get("receiver") == "pager")

    def setting(key: str) -> Any:
        return pager.get(key, root.get(key))

    return PagerTiming(
        tuple(setting("group_by")),
        parse_duration(setting("group_wait")),
        parse_duration(setting("group_interval")),
        parse_duration(setting("repeat_interval")),
        tuple(load_inhibitions(alertmanager_yaml)),
    )


def pages(run: RunOutcome, timing: PagerTiming) -> list[Page]:
    """Every critical notification of one run (one node)."""
    groups: dict[tuple[str, ...], list[Episode]] = {}
    every, rules = list(run.episodes), list(timing.inhibitions)
    for critical in (e for e in every if e.severity == PAGE_SEVERITY):
        for e in unmuted(critical, every, rules, timing.step_s):
            labels = dict(e.labels) | {"alertname": e.alert}
            groups.setdefault(tuple(labels.get(k, "") for k in timing.group_by), []).append(e)
    found: list[Page] = []
    for members in groups.values():
        found += _group_pages(run, sorted(members, key=lambda e: e.start), timing)
    return sorted(found, key=lambda p: (p.at, p.alert))


def _group_pages(run: RunOutcome, members: list[Episode], timing: PagerTiming) -> list[Page]:
    found: list[Page] = []
    pending = list(members)
    while pending:
        first = pending.pop(0)
        active, fresh = [first], [first]
        tick, until, last_page = first.start + timing.wait_s, first.end, None
        while True:
            while pending and pending[0].start <= tick:
                joined = pending.pop(0)
                active.append(joined)
                fresh.append(joined)
                until = max(until, joined.end)
            firing = [e for e in active if e.start <= tick < e.end + timing.step_s]
            new = [e for e in fresh if e in firing]
            if new:
                found.append(Page(run.scenario, run.seed, first.alert, tick, tuple(new)))
                last_page = tick
            elif firing and last_page is not None and tick - last_page >= timing.repeat_s:
                found.append(Page(run.scenario, run.seed, first.alert, tick, tuple(firing), reminder=True))
                last_page = tick
            fresh = []
            if tick >= until:
                break  # every alert of the group resolved: the next one starts a new group
            tick += timing.interval_s
    return found


def per_incident(outcomes: list[RunOutcome], timing: PagerTiming) -> dict[str, Any]:
    """Pages per alert and per incident over every run, and the pages no incident explains."""
    by_alert: dict[str, dict[str, int]] = {}
    by_incident: dict[tuple[str, str], list[int]] = {}
    false_pages: list[Page] = []
    for run in outcomes:
        counts = [0] * len(run.windows)
        for page in pages(run, timing):
            explained = {i for i, w in enumerate(run.windows) for e in page.announces if explains(w, e)}
            row = by_alert.setdefault(page.alert, {"pages": 0, "false": 0, "reminders": 0})
            if page.reminder:
                row["reminders"] += 1
                continue
            row["pages"] += 1
            row["false"] += not explained
            if not explained:
                false_pages.append(page)
            for i in explained:
                counts[i] += 1
        for window, n in zip(run.windows, counts, strict=True):
            if n:
                by_incident.setdefault((run.scenario, window.incident), []).append(n)
    return {
        "alerts": by_alert,
        "incidents": [
            {"scenario": s, "incident": i, "pages_per_run": n, "max": max(n)}
            for (s, i), n in sorted(by_incident.items())
        ],
        "false_pages": [
            {"alert": p.alert, "scenario": p.scenario, "seed": p.seed, "at": p.at} for p in false_pages
        ],
    }


def markdown(found: dict[str, Any], timing: PagerTiming) -> str:
    """The report's section on pages."""
    alerts = "\n".join(
        f"| `{alert}` | {row['pages']} | {row['false']} | {row['reminders']} |"
        for alert, row in sorted(found["alerts"].items())
    )
    incidents = "\n".join(
        f"| {row['scenario']} | {row['incident']} | {', '.join(map(str, row['pages_per_run']))} | "
        f"{'met' if row['max'] <= PAGE_TARGET else 'NOT MET'} |"
        for row in found["incidents"]
    )
    worst = max(found["incidents"], key=lambda row: row["max"], default=None)
    headline = (
        "No incident paged."
        if worst is None
        else f"Most pages for one incident on one node: {worst['max']} ({worst['scenario']}: "
        f"{worst['incident']}); pages no incident explains: {len(found['false_pages'])}."
    )
    return (
        "## Pages per incident\n\n"
        f"{headline}\n\n"
        f"Critical notifications as the pager route sends them: grouped by `{', '.join(timing.group_by)}`, "
        f"first after {timing.wait_s:g} s, then every {timing.interval_s:g} s an alert joined the group, "
        f"and a reminder after {timing.repeat_s:g} s still firing (listed, not counted as pages); one run "
        f"is one node; the bundle's inhibit rules "
        f"applied. Target: {PAGE_TARGET} page per cause per node.\n\n"
        "| alert | pages | pages no incident explains | reminders |\n| --- | --- | --- | --- |\n"
        + (alerts or "| none | 0 | 0 | 0 |")
        + "\n\n| scenario | incident | pages, per seed | target |\n| --- | --- | --- | --- |\n"
        + (incidents or "| - | no incident paged | - | - |")
        + "\n"
    )
