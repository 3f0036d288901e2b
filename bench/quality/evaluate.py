"""Scoring, pure: truth matching, precision, recall, latency, lead time.

Times are simulated seconds from a run's start. An episode is one firing of one alert series (its name
and labels) as the rule engine produced it, from its first firing evaluation to its last (`for` and
`keep_firing_for` are the engine's, see rule_engine.py).

An episode is true when it starts inside a truth window that lists its alert (expected or accepted),
whose identifying labels it carries (a label the alert does not have, such as `gpu` on a fleet-wide
alert, is not compared), up to the window's grace after its end; otherwise it is a false positive.
A window is detected by an expected alert when a matching episode starts inside it; the detection
latency is that start minus the window's start. Alerts of severity `info` are routed nowhere by the
bundle's Alertmanager tree: they are listed, not scored. `ServescopeWatchdog` always fires by design.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from .truth import TruthWindow

HEARTBEAT = "ServescopeWatchdog"
LEAK_ALERTS = ("ServescopeGpuMemoryLeakSuspected", "ServescopeGpuMemoryExhaustionSoon")
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Episode:
    alert: str
    severity: str
    scenario: str
    seed: int
    labels: Labels
    start: float
    end: float


@dataclass(frozen=True)
class RunOutcome:
    scenario: str
    seed: int
    windows: tuple[TruthWindow, ...]
    episodes: tuple[Episode, ...]


def labels_match(window: Labels, episode: Labels) -> bool:
    have = dict(episode)
    return all(have.get(key, value) == value for key, value in window)


def explains(window: TruthWindow, episode: Episode) -> bool:
    """True when the window covers the episode: its alert, its labels, a start inside (with grace)."""
    return (
        episode.alert in (*window.expect, *window.accept)
        and labels_match(window.labels, episode.labels)
        and window.start - window.lead_s <= episode.start <= window.end + window.grace_s
    )


def detection(window: TruthWindow, alert: str, episodes: Iterable[Episode]) -> Episode | None:
    """The first episode of `alert` that starts inside the window with the window's labels."""
    found = [
        e
        for e in episodes
        if e.alert == alert
        and labels_match(window.labels, e.labels)
        and window.start - window.lead_s <= e.start <= window.end
    ]
    return min(found, key=lambda e: e.start, default=None)


@dataclass
class AlertScore:
    alert: str
    severity: str
    episodes: int = 0
    true: int = 0
    repeats: int = 0  # true episodes after the first of the same series in the same incident (flapping)
    incidents: int = 0
    detected: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def false(self) -> int:
        return self.episodes - self.true

    @property
    def precision(self) -> float | None:
        return self.true / self.episodes if self.episodes else None

    @property
    def recall(self) -> float | None:
        return self.detected / self.incidents if self.incidents else None

    @property
    def latency_p50(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None

    @property
    def latency_max(self) -> float | None:
        return max(self.latencies) if self.latencies else None


@dataclass(frozen=True)
class Missed:
    alert: str
    incident: str
    scenario: str
    seed: int
    start: float
    end: float


@dataclass(frozen=True)
class LeadTime:
    """How long before the OOM an alert first fired during a leak (None: it never fired in time)."""

    alert: str
    scenario: str
    seed: int
    oom_at: float
    fired_at: float | None

    @property
    def lead(self) -> float | None:
        return None if self.fired_at is None else self.oom_at - self.fired_at


@dataclass
class Scores:
    alerts: dict[str, AlertScore]
    true_positives: list[Episode]
    false_positives: list[Episode]
    missed: list[Missed]
    lead_times: list[LeadTime]
    info: list[Episode]


def score(outcomes: Iterable[RunOutcome], severities: dict[str, str]) -> Scores:
    """Every alert's score over every run; `severities` names the alerts evaluated."""
    alerts = {name: AlertScore(name, sev) for name, sev in severities.items() if name != HEARTBEAT}
    scores = Scores(alerts, [], [], [], [], [])
    for run in outcomes:
        _score_episodes(run, scores)
        _score_windows(run, scores)
    return scores


def _score_episodes(run: RunOutcome, scores: Scores) -> None:
    paged: set[tuple[int, str, Labels]] = set()
    for episode in sorted(run.episodes, key=lambda e: e.start):
        if episode.alert == HEARTBEAT:
            continue
        if episode.severity == "info":
            scores.info.append(episode)
            continue
        score = scores.alerts[episode.alert]
        score.episodes += 1
        covering = [i for i, w in enumerate(run.windows) if explains(w, episode)]
        if covering:
            score.true += 1
            scores.true_positives.append(episode)
            keys = {(i, episode.alert, episode.labels) for i in covering}
            if keys & paged:
                score.repeats += 1
            paged |= keys
        else:
            scores.false_positives.append(episode)


def _score_windows(run: RunOutcome, scores: Scores) -> None:
    for window in run.windows:
        for alert in window.expect:
            score = scores.alerts[alert]
            score.incidents += 1
            first = detection(window, alert, run.episodes)
            if first is None:
                scores.missed.append(
                    Missed(alert, window.incident, run.scenario, run.seed, window.start, window.end)
                )
            else:
                score.detected += 1
                score.latencies.append(first.start - window.start)
        if window.ends_in_oom:
            for alert in LEAK_ALERTS:
                first = detection(window, alert, run.episodes)
                fired = None if first is None else first.start
                scores.lead_times.append(LeadTime(alert, run.scenario, run.seed, window.end, fired))
