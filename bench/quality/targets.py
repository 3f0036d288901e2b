"""The alert-quality targets, measured from the scores: precision, recall and the leak alert's lead."""

from __future__ import annotations

from dataclasses import dataclass

from .evaluate import AlertScore, Scores

PRECISION_TARGET = 0.95
RECALL_TARGET = 1.0
LEAK_LEAD_TARGET_S = 15 * 60.0
LEAK_TARGET_RATE = 40.0
LEAK_TARGET_ALERT = "ServescopeGpuMemoryLeakSuspected"


@dataclass(frozen=True)
class Target:
    name: str
    value: str
    met: bool


def _every(measure: str, alerts: list[AlertScore], none: str) -> Target:
    """A per-alert target on `measure` ("precision" or "recall"): met when every alert reaches it."""
    bound, name = {
        "precision": (PRECISION_TARGET, f"precision >= {PRECISION_TARGET} for every alert that fired"),
        "recall": (RECALL_TARGET, f"recall {RECALL_TARGET:g} for every alert with incidents"),
    }[measure]

    def value(s: AlertScore) -> float:
        found: float | None = getattr(s, measure)
        return found or 0.0

    worst = min(alerts, key=value, default=None)
    shown = none if worst is None else f"lowest {ratio(value(worst))} ({worst.alert})"
    return Target(name, shown, all(value(s) >= bound for s in alerts))


def targets(scores: Scores, leak_rates: dict[str, float]) -> list[Target]:
    scored = [s for s in scores.alerts.values() if s.severity != "info"]
    fired = [s for s in scored if s.episodes]
    expected = [s for s in scored if s.incidents]
    episodes = sum(s.episodes for s in scored)
    overall = sum(s.true for s in scored) / episodes if episodes else 1.0
    lead = worst_leak_lead(scores, leak_rates)
    return [
        _every("precision", fired, "none fired"),
        Target(
            f"precision >= {PRECISION_TARGET} over all scored episodes",
            f"{overall:.3f} ({episodes} episodes)",
            overall >= PRECISION_TARGET,
        ),
        _every("recall", expected, "no incidents"),
        Target(
            f"{LEAK_TARGET_ALERT} >= 15 min before OOM at {LEAK_TARGET_RATE:g} MiB/min (worst seed)",
            "no OOM in the runs" if lead is None else minutes(lead),
            lead is not None and lead >= LEAK_LEAD_TARGET_S,
        ),
    ]


def worst_leak_lead(scores: Scores, leak_rates: dict[str, float]) -> float | None:
    """The leak alert's smallest lead before an OOM at the target rate; None when no such run OOMed.

    A run where the alert did not fire before the OOM counts as no warning at all: a lead of 0.
    """
    leads = [
        lt.lead or 0.0
        for lt in scores.lead_times
        if lt.alert == LEAK_TARGET_ALERT and leak_rates.get(lt.scenario) == LEAK_TARGET_RATE
    ]
    return min(leads, default=None)


def summary(scores: Scores, leak_rates: dict[str, float]) -> dict[str, float | None]:
    """The headline figures: precision and recall over every scored alert, the leak alert's worst lead."""
    scored = [s for s in scores.alerts.values() if s.severity != "info"]
    episodes, incidents = sum(s.episodes for s in scored), sum(s.incidents for s in scored)
    worst = worst_leak_lead(scores, leak_rates)
    return {
        "precision": sum(s.true for s in scored) / episodes if episodes else None,
        "recall": sum(s.detected for s in scored) / incidents if incidents else None,
        "false_positives": float(len(scores.false_positives)),
        "leak_lead_minutes": None if worst is None else worst / 60,
    }


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def minutes(seconds: float | None, missing: str = "-") -> str:
    if seconds is None:
        return missing
    if seconds == float("-inf"):
        return "never"
    return f"{seconds / 60:.1f} min"
