"""Alertmanager's inhibit rules over firing episodes: what is left of an alert once its sources mute it.

A rule mutes a target alert while a source alert fires whose labels the rule's `equal` names match
(a label both lack counts as equal, as in Alertmanager). Episodes carry their rule labels and the
series' labels without `instance` and `job`: every episode of one run has the same target, so those
compare equal. An alert is never muted by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from .evaluate import Episode

_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(.*)"\s*$')
BUNDLE = {"bundle": "servescope"}  # every rule of the bundle carries it


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.name, "")
        if self.op in ("=~", "!~"):
            found = re.fullmatch(self.value, have) is not None
            return found if self.op == "=~" else not found
        return (have == self.value) if self.op == "=" else (have != self.value)


def parse_matcher(text: str) -> Matcher:
    found = _MATCHER.match(text)
    if found is None:
        raise ValueError(f'inhibit rule matcher {text!r}: not name op "value"')
    return Matcher(*found.groups())


@dataclass(frozen=True)
class Inhibition:
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]


def load_inhibitions(alertmanager_yaml: Path) -> list[Inhibition]:
    """The inhibit rules of an Alertmanager configuration file."""
    rules = yaml.safe_load(alertmanager_yaml.read_text()).get("inhibit_rules") or []
    return [
        Inhibition(
            tuple(parse_matcher(m) for m in rule.get("source_matchers", ())),
            tuple(parse_matcher(m) for m in rule.get("target_matchers", ())),
            tuple(rule.get("equal", ())),
        )
        for rule in rules
    ]


def labels_of(episode: Episode) -> dict[str, str]:
    return dict(episode.labels) | BUNDLE | {"alertname": episode.alert, "severity": episode.severity}


def muted_by(target: Episode, episodes: list[Episode], rules: list[Inhibition]) -> list[tuple[float, float]]:
    """The [first, last] firing steps of the sources that mute `target`, in no particular order."""
    mine = labels_of(target)
    found = []
    for rule in rules:
        if not all(m.matches(mine) for m in rule.target):
            continue
        for source in episodes:
            theirs = labels_of(source)
            if source is target or not all(m.matches(theirs) for m in rule.source):
                continue
            if all(mine.get(k, "") == theirs.get(k, "") for k in rule.equal):
                found.append((source.start, source.end))
    return found


def unmuted(target: Episode, episodes: list[Episode], rules: list[Inhibition], step: float) -> list[Episode]:
    """The parts of `target` during which no source mutes it, each as an episode of its own."""
    parts = [(target.start, target.end)]
    for start, end in muted_by(target, episodes, rules):
        kept = []
        for a, b in parts:
            if start - step >= a:
                kept.append((a, min(b, start - step)))
            if end + step <= b:
                kept.append((max(a, end + step), b))
        parts = kept
    return [replace(target, start=a, end=b) for a, b in sorted(parts)]
