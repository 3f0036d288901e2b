"""Scoring, pure: `for` semantics, firing episodes, truth matching, precision, recall, latency, lead time.

Times are simulated seconds from a run's start. An alert's expression "held" at an evaluation step when
the query returned its series at that step; it fires at t when it held at every step of [t - for, t],
as Prometheus keeps an alert pending while the expression holds at consecutive evaluations. Consecutive
firing steps of one series (alert name + labels) form an episode: one notification.

An episode is true when it starts inside a truth window that lists its alert (expected or accepted),
whose identifying labels it carries (a label the alert does not have, such as `gpu` on a fleet-wide
alert, is not compared), up to the window's grace after its end; otherwise it is a false positive.
A window is detected by an expected alert when a matching episode starts inside it; the detection
latency is that start minus the window's start. Alerts of severity `info` are routed nowhere by the
bundle's Alertmanager tree: they are listed, not scored. `ServescopeWatchdog` always fires by design.
"""

from __future__ import annotations

import math
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


def firing_steps(held: Iterable[float], for_s: float, step: float, keep_s: float = 0.0) -> list[float]:
    """The steps at which an alert fires, given the steps at which its expression held.

    `keep_s` is the rule's keep_firing_for: once fired, the alert stays firing that long after its
    expression last held, and an expression that holds again within it fires on without a new `for`.
    """
    fired: list[float] = []
    since = previous = None
    kept_until = -math.inf
    for t in sorted(held):
        if previous is not None and t - previous > 1.5 * step:
            # The expression stopped: a fired alert fires on through its keep_firing_for.
            fired += _steps_between(previous, min(t, kept_until + step), step)
            if t > kept_until + 1.5 * step:
                since = None  # a missed step resets the pending clock, as in Prometheus
        if since is None:
            since = t
        if t - since >= for_s - 1e-6 or t <= kept_until + 1e-6:
            fired.append(t)
            kept_until = t + keep_s
        previous = t
    if previous is not None:
        fired += _steps_between(previous, kept_until + step, step)
    return fired


def _steps_between(after: float, before: float, step: float) -> list[float]:
    """The evaluation steps strictly after `after` and before `before`."""
    if before - after <= step:
        return []
    count = math.ceil((before - after) / step - 1e-6) - 1
    return [after + step * (i + 1) for i in range(count)]


def group_episodes(steps: list[float], step: float) -> list[tuple[float, float]]:
    """Runs of consecutive steps as (first, last)."""
    runs: list[tuple[float, float]] = []
    for t in steps:
        if runs and t - runs[-1][1] <= 1.5 * step:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def labels_match(window: Labels, episode: Labels) -> bool:
    have = dict(episode)
    return all(have.get(key, value) == value for key, value in window)


def explains(window: TruthWindow, episode: Episode) -> bool:
    """True when the window covers the episode: its alert, its labels, a start inside (with grace)."""
    return (
        episode.alert in (*window.expect, *window.accept)
        and labels_match(window.labels, episode.labels)
        and window.start <= episode.start <= window.end + window.grace_s
    )


def detection(window: TruthWindow, alert: str, episodes: Iterable[Episode]) -> Episode | None:
    """The first episode of `alert` that starts inside the window with the window's labels."""
    found = [
        e
        for e in episodes
        if e.alert == alert
        and labels_match(window.labels, e.labels)
        and window.start <= e.start <= window.end
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
