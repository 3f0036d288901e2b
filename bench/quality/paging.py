"""The paging targets: per paging alert, precision and recall; per run of a scenario where an incident
needs a page, exactly one page for it; where none does (the SLO holds), no page at all.

The pages are the real Alertmanager's (pager.py); an incident "needs a page" when it expects one of the
bundle's critical alerts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .evaluate import RunOutcome, Scores
from .pager import Page, per_incident
from .targets import PRECISION_TARGET, Target, ratio


@dataclass(frozen=True)
class RunPages:
    """What one run paged: per incident that needs a page, how many times; and the pages nothing explains."""

    scenario: str
    seed: int
    needed: dict[str, int]  # incident -> pages that explain it
    pages: list[Page]
    false: list[Page]

    @property
    def met(self) -> bool:
        if self.false:
            return False
        return all(n == 1 for n in self.needed.values()) if self.needed else not self.pages


def judge(run: RunOutcome, pages: list[Page], paging_alerts: set[str]) -> RunPages:
    counts, false = per_incident(run, pages)
    needed = {w.incident for w in run.windows if set(w.expect) & paging_alerts}
    return RunPages(
        run.scenario, run.seed, {name: counts.get(name, 0) for name in sorted(needed)}, pages, false
    )


def targets(scores: Scores, runs: list[RunPages], paging_alerts: set[str]) -> list[Target]:
    paging = [scores.alerts[a] for a in sorted(paging_alerts) if a in scores.alerts]
    fired = [s for s in paging if s.episodes]
    expected = [s for s in paging if s.incidents]
    worst_precision = min(fired, key=lambda s: s.precision or 0.0, default=None)
    worst_recall = min(expected, key=lambda s: s.recall or 0.0, default=None)
    with_incident = [r for r in runs if r.needed]
    quiet = [r for r in runs if not r.needed]
    return [
        Target(
            f"precision >= {PRECISION_TARGET} for every paging alert",
            "none fired"
            if worst_precision is None
            else f"lowest {ratio(worst_precision.precision)} ({worst_precision.alert})",
            all((s.precision or 0.0) >= PRECISION_TARGET for s in fired),
        ),
        Target(
            "recall 1 for every paging alert",
            "no incidents"
            if worst_recall is None
            else f"lowest {ratio(worst_recall.recall)} ({worst_recall.alert})",
            bool(expected) and all((s.recall or 0.0) == 1.0 for s in expected),
        ),
        Target(
            "exactly one page per incident and seed, in every paging scenario",
            f"{sum(r.met for r in with_incident)} of {len(with_incident)} runs",
            all(r.met for r in with_incident),
        ),
        Target(
            "no page where the SLOs hold",
            f"{sum(len(r.pages) for r in quiet)} pages in {len(quiet)} runs",
            all(not r.pages for r in quiet),
        ),
    ]


def to_json(runs: list[RunPages]) -> list[dict[str, Any]]:
    return [
        {
            "scenario": r.scenario,
            "seed": r.seed,
            "pages_per_incident": r.needed,
            "pages": [
                {"at_s": p.at, "group": dict(p.group), "alerts": sorted({a.alert for a in p.alerts})}
                for p in r.pages
            ],
            "unexplained_pages": len(r.false),
            "met": r.met,
        }
        for r in runs
    ]


def markdown(runs: list[RunPages], scores: Scores, paging_alerts: set[str]) -> str:
    alerts = "\n".join(
        f"| `{s.alert}` | {s.episodes} | {s.true} | {ratio(s.precision)} | {s.detected}/{s.incidents} "
        f"| {ratio(s.recall)} |"
        for s in (scores.alerts[a] for a in sorted(paging_alerts) if a in scores.alerts)
    )
    rows = []
    for scenario in sorted({r.scenario for r in runs}):
        mine = [r for r in runs if r.scenario == scenario]
        incidents = sorted({name for r in mine for name in r.needed})
        per_seed = "; ".join(
            f"seed {r.seed}: {len(r.pages)}" + (f" ({len(r.false)} unexplained)" if r.false else "")
            for r in mine
        )
        counts = ", ".join(
            f"{name}: " + "/".join(str(r.needed.get(name, 0)) for r in mine) for name in incidents
        )
        rows.append(
            f"| {scenario} | {counts or 'none (the SLOs hold)'} | {per_seed} | "
            f"{'met' if all(r.met for r in mine) else 'NOT MET'} |"
        )
    return (
        "## Pages\n\nThe pages a real Alertmanager (the bundle's configuration) sends for each run's firing "
        "alerts, replayed in order: a page is a pager group that gets an alert no inhibition mutes (a group "
        "closed for a group_interval that opens again is a new page).\n\n"
        "| paging alert | episodes | true | precision | detected | recall |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        + (alerts or "| none | - | - | - | - | - |")
        + "\n\n| scenario | pages per incident that needs one (per seed) | pages per seed | target |\n"
        "| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )
