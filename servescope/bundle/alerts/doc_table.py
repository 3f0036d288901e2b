"""The alerts table of docs/alerts.md: every alert, page or ticket, the symptom it requires and what
inhibits it, all read from the built rules and inhibitions (never written by hand)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from servescope.bundle.alerts.alertmanager_inhibit import inhibit_rules
from servescope.bundle.alerts.bundle import groups
from servescope.bundle.alerts.model import Alert
from servescope.bundle.alerts.promql import Selector, parse_promql, walk
from servescope.bundle.alerts.symptom import reads_only_blindness
from servescope.core.config import AlertsConfig

KIND = {"critical": "page", "warning": "ticket", "info": "none (routed nowhere)"}
# The SLI an error-ratio record measures, from its name.
SLI_WORDS = {"ttft": "TTFT", "e2e": "end-to-end latency", "availability": "availability"}
# An SLI's error-ratio record, or a record of its burn (a canary revision's), per model or revision.
SLI_RECORD = re.compile(r"^model(?:_revision)?:servescope_(\w+?)_(?:slo_)?errors:\w+$")
_MATCHER = re.compile(r'^(?P<label>\w+)(?P<op>=~|!~|!=|=)"(?P<value>.*)"$')


def _slis(alert: Alert) -> list[str]:
    names = {node.name for node, _ in walk(parse_promql(alert.expr)) if isinstance(node, Selector)}
    found = [match.group(1) for match in map(SLI_RECORD.match, names) if match]
    return [SLI_WORDS.get(sli, sli) for sli in sorted(set(found))]


# What a page needs besides its symptom: the cause it names.
CAUSE = {
    "ServescopeKvPressureHurtingRequests": (
        ", with the engine's KV cache over 70% on a saturated GPU (the cause it names)"
    ),
    "ServescopeCanarySloBurn": ", of a canary revision missing the bound more often than the stable one",
}


def requires(alert: Alert) -> str:
    """The symptom an alert requires, in words."""
    if alert.severity == "critical" and reads_only_blindness(parse_promql(alert.expr)):
        return "none: the monitoring is blind (it reads only `up` and kube-state-metrics)"
    slis = " or ".join(_slis(alert))
    if slis and alert.severity == "critical":
        pairs = "14.4x over 1 h and 5 min, or 6x over 6 h and 30 min"
        return f"{slis} error ratio burning at a paging rate ({pairs}){CAUSE.get(alert.name, '')}"
    if slis:
        return f"{slis} error ratio burning at a ticket rate (3x over 1 d and 2 h, or 1x over 3 d and 6 h)"
    return "none (a ticket: a cause or a risk)" if alert.severity == "warning" else "-"


def _labels(alert: Alert) -> dict[str, str]:
    return {"alertname": alert.name, "severity": alert.severity, "bundle": "servescope"}


def _matches(matchers: Sequence[str], labels: dict[str, str]) -> bool:
    for text in matchers:
        found = _MATCHER.match(text)
        if found is None:
            continue
        label, op, value = found.group("label", "op", "value")
        have = labels.get(label)
        if have is None:
            continue  # a label only some of the alert's series carry (source="nvml"): it may match
        hit = re.fullmatch(value, have) is not None if "~" in op else have == value
        if hit == op.startswith("!"):
            return False
    return True


def _carries(alert: Alert, label: str) -> bool:
    """Whether the alert's series carry `label`: its keys, and the selector's `job` where it reads one."""
    return label in alert.keys or (label == "job" and "job" in alert.expr)


def inhibited_by(alert: Alert, rules: list[dict[str, Any]], alerts: Sequence[Alert]) -> str:
    """The alerts that mute `alert` in Alertmanager, with the labels they must share with it."""
    muting: dict[str, list[str]] = {}
    for rule in rules:
        if not _matches(rule["target_matchers"], _labels(alert)):
            continue
        if not all(_carries(alert, label) for label in rule["equal"]):
            continue  # a GPU's inhibition on an alert without a GPU: it never applies
        on = f" (same {', '.join(rule['equal'])})" if rule["equal"] else ""
        for source in alerts:
            if source.name != alert.name and _matches(rule["source_matchers"], _labels(source)):
                muting.setdefault(on, [])
                if source.name not in muting[on]:
                    muting[on].append(source.name)
    return "; ".join(", ".join(f"`{s}`" for s in names) + on for on, names in muting.items()) or "-"


def alerts_table(cfg: AlertsConfig | None = None) -> str:
    cfg = cfg or AlertsConfig()
    alerts = [rule for group in groups(cfg) for rule in group.rules if isinstance(rule, Alert)]
    rules = inhibit_rules(cfg, alerts)
    rows = [
        "| alert | page or ticket | for | symptom it requires | inhibited by | what it means |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for alert in alerts:
        cells = (
            f"`{alert.name}`",
            KIND[alert.severity],
            alert.for_,
            requires(alert),
            inhibited_by(alert, rules, alerts),
            alert.summary.replace("|", "\\|"),
        )
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"
