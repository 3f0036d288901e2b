"""An offline rule linter: what pint would catch, for the bundle's rules (pint is not installable here).

`lint(groups, config)` checks the rules as the bundle renders them; `lint_rule_file(path)` checks a
written rules.yaml (or the PrometheusRule). Every problem names the rule, a check id and what is wrong:

- alerts/severity, alerts/summary, alerts/description, alerts/runbook-url, alerts/dashboard-url: the
  labels and annotations every alert carries (summary static, runbook under <base>/runbooks/<Alert>);
- alerts/for: `for` present, 0s..6h, and 0 only for Watchdog;
- alerts/labels-template: no templating (`{{`, `$value`) in labels: it resets `for` on every change;
- alerts/page-symptom: a critical alert (a page) requires a symptom measured against an SLO (an error
  ratio record of the bundle), or reads only `up` and kube-state-metrics (the monitoring is blind);
- promql/syntax: the expression does not parse;
- promql/counter: a counter (`*_total`, a histogram's `_bucket`/`_count`/`_sum`) read outside
  rate/irate/increase/resets (or absent(), which reads no value);
- promql/rate-gauge: rate/irate/increase over a metric the catalog says is a gauge;
- promql/histogram-quantile: histogram_quantile over anything but `sum by (le, ...)`/`sum without (...)`
  keeping le;
- promql/unknown-metric: a name that is neither exported (catalog, DCGM counters, vLLM aliases),
  recorded by the bundle, nor Prometheus' own (up, ALERTS, ALERTS_FOR_STATE);
- rules/record-name (level:metric:operations), rules/alert-name (CamelCase, `Servescope` prefix),
  rules/duplicate, rules/shape (a rule that is neither an alert nor a record).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from servescope.bundle.alerts.known_metrics import Metrics, exported_metrics, is_counter
from servescope.bundle.alerts.model import SEVERITIES, Group
from servescope.bundle.alerts.promql import Call, Node, PromQLError, Selector, parse_promql, unwrap, walk
from servescope.bundle.alerts.symptom import reads_only_blindness, requires_symptom
from servescope.core.config import AlertsConfig
from servescope.core.durations import DurationError, parse_duration

Records = dict[str, list[Node]]  # a rule file's recording rules' parsed expressions, by name

WATCHDOG = "ServescopeWatchdog"
ALERT_PREFIX = "Servescope"
MAX_FOR_SECONDS = 6 * 3600
COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase", "resets"})
# These read whether a series exists, never its value: a counter inside them is fine.
PRESENCE_FUNCTIONS = frozenset({"absent", "absent_over_time", "present_over_time"})
RATE_FUNCTIONS = frozenset({"rate", "irate", "increase"})
ALERT_NAME = re.compile(rf"^{ALERT_PREFIX}(?:[A-Z][a-z0-9]*)+$")
RECORD_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+$")


@dataclass(frozen=True, order=True)
class LintProblem:
    """One finding of the linter; sorted, the findings read rule by rule."""

    rule: str  # the alert's or the record's name
    check: str  # one of the checks listed above, e.g. promql/counter
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: [{self.check}] {self.message}"


def _templated(text: str) -> bool:
    return "{{" in text or "$value" in text


def _alert_problems(rule: dict[str, Any], config: AlertsConfig, records: Records) -> Iterator[LintProblem]:
    name = str(rule.get("alert", ""))
    labels = rule.get("labels") or {}
    annotations = rule.get("annotations") or {}

    def problem(check: str, message: str) -> LintProblem:
        return LintProblem(name, check, message)

    if name != WATCHDOG and not ALERT_NAME.match(name):
        yield problem("rules/alert-name", f"alert names are CamelCase and start with {ALERT_PREFIX}")
    if labels.get("severity") not in SEVERITIES:
        yield problem("alerts/severity", f"severity {labels.get('severity')!r} is not one of {SEVERITIES}")
    for label, value in labels.items():
        if _templated(str(value)):
            yield problem(
                "alerts/labels-template",
                f"label {label}={value!r} is templated: a label that changes resets `for` and splits "
                "the alert",
            )
    summary = str(annotations.get("summary") or "")
    if not summary.strip():
        yield problem("alerts/summary", "summary annotation missing")
    elif _templated(summary):
        yield problem("alerts/summary", "summary must be static (no {{ }}): put the details in description")
    if not str(annotations.get("description") or "").strip():
        yield problem("alerts/description", "description annotation missing")
    runbook = str(annotations.get("runbook_url") or "")
    expected = f"{config.runbook_base_url}/runbooks/{name}"
    if runbook != expected and not runbook.startswith(expected + "?"):
        yield problem("alerts/runbook-url", f"runbook_url {runbook!r} does not point at {expected}")
    dashboard = str(annotations.get("dashboard_url") or "")
    if not dashboard.startswith(f"{config.dashboard_base_url}/d/"):
        yield problem(
            "alerts/dashboard-url",
            f"dashboard_url {dashboard!r} is not a dashboard under {config.dashboard_base_url}/d/",
        )
    yield from _for_problems(name, rule.get("for"))
    if labels.get("severity") == "critical":
        yield from _page_problems(name, str(rule.get("expr", "")), records)


def _page_problems(name: str, expr: str, records: Records) -> Iterator[LintProblem]:
    try:
        tree = parse_promql(expr)
    except PromQLError:
        return  # promql/syntax says so
    if not (requires_symptom(tree, records) or reads_only_blindness(tree)):
        yield LintProblem(
            name,
            "alerts/page-symptom",
            "a page must require a symptom on an SLO (an error ratio record, "
            "model:servescope_*_errors:ratio*, or a record of one, in every branch), not a cause alone; "
            "make it a warning (a ticket) or join the symptom with `and`",
        )


def _for_problems(name: str, for_: Any) -> Iterator[LintProblem]:
    if for_ is None:
        yield LintProblem(name, "alerts/for", "`for` missing: one bad scrape would fire the alert")
        return
    try:
        seconds = parse_duration(str(for_))
    except DurationError as exc:
        yield LintProblem(name, "alerts/for", str(exc))
        return
    if seconds > MAX_FOR_SECONDS:
        yield LintProblem(name, "alerts/for", f"for: {for_} is longer than 6h: the alert comes too late")
    elif seconds == 0 and name != WATCHDOG:
        yield LintProblem(name, "alerts/for", "for: 0 fires on a single evaluation; only Watchdog may")


def _expr_problems(name: str, expr: str, records: set[str]) -> Iterator[LintProblem]:
    try:
        tree = parse_promql(expr)
    except PromQLError as exc:
        yield LintProblem(name, "promql/syntax", f"{exc}: {expr}")
        return
    metrics = exported_metrics()
    for node, enclosing in walk(tree):
        if isinstance(node, Selector):
            yield from _selector_problems(name, node, enclosing, metrics, records)
        elif isinstance(node, Call):
            yield from _call_problems(name, node, metrics)


def _selector_problems(
    name: str, node: Selector, enclosing: Call | None, metrics: Metrics, records: set[str]
) -> Iterator[LintProblem]:
    metric = node.name
    if not metric:
        return
    if not metrics.known(metric) and metric not in records:
        yield LintProblem(
            name,
            "promql/unknown-metric",
            f"{metric} is not exported by servescope (catalog, DCGM counters), recorded by the bundle, "
            "nor one of Prometheus' own",
        )
    if is_counter(metric, metrics, records):
        function = enclosing.name.lower() if enclosing else None
        if function not in COUNTER_FUNCTIONS | PRESENCE_FUNCTIONS:
            where = f"inside {function}()" if function else "bare"
            yield LintProblem(
                name,
                "promql/counter",
                f"counter {metric} is read {where}: wrap it in rate(), irate(), increase() or resets()",
            )


def _call_problems(name: str, node: Call, metrics: Metrics) -> Iterator[LintProblem]:
    function = node.name.lower()
    if function in RATE_FUNCTIONS and node.children:
        target = unwrap(node.children[0])
        if isinstance(target, Selector) and metrics.kinds.get(target.name) == "gauge":
            yield LintProblem(
                name, "promql/rate-gauge", f"{function}() over gauge {target.name}: use deriv() or delta()"
            )
    if function == "histogram_quantile":
        if len(node.children) != 2:
            yield LintProblem(name, "promql/syntax", "histogram_quantile takes two arguments")
            return
        buckets = unwrap(node.children[1])
        if not _keeps_le(buckets):
            yield LintProblem(
                name,
                "promql/histogram-quantile",
                "histogram_quantile over something else than `sum by (le, ...)` or `sum without (...)` "
                "keeping le: the quantile is computed per series, or over buckets summed without le",
            )


def _keeps_le(node: Node) -> bool:
    if not isinstance(node, Call) or node.name != "sum" or node.grouping is None:
        return False
    kind, labels = node.grouping
    return ("le" in labels) if kind == "by" else ("le" not in labels)


def _rules(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    groups = document.get("groups")
    if groups is None and isinstance(document.get("spec"), dict):  # a PrometheusRule
        groups = document["spec"].get("groups")
    for group in groups or []:
        for rule in group.get("rules") or []:
            yield str(group.get("name", "")), rule


def _record_trees(rules: list[dict[str, Any]]) -> Records:
    """Each recording rule's parsed expressions, by record name (one that does not parse is left out:
    promql/syntax says so)."""
    trees: Records = {}
    for rule in rules:
        if "record" in rule and "expr" in rule:
            try:
                trees.setdefault(str(rule["record"]), []).append(parse_promql(str(rule["expr"])))
            except PromQLError:
                continue
    return trees


def lint_document(document: dict[str, Any], config: AlertsConfig | None = None) -> list[LintProblem]:
    """Problems of a rule file's content ({groups: [...]}, or a PrometheusRule), sorted."""
    config = config or AlertsConfig()
    rules = [rule for _, rule in _rules(document)]
    records = {str(rule["record"]) for rule in rules if "record" in rule}
    record_trees = _record_trees(rules)
    problems: list[LintProblem] = []
    seen: set[tuple[str, str]] = set()
    for rule in rules:
        kind = "alert" if "alert" in rule else "record" if "record" in rule else ""
        name = str(rule.get(kind, "?"))
        if not kind or "expr" not in rule:
            problems.append(LintProblem(name, "rules/shape", "a rule needs `alert` or `record`, and `expr`"))
            continue
        if (kind, name) in seen:
            problems.append(LintProblem(name, "rules/duplicate", f"{kind} {name} is defined twice"))
        seen.add((kind, name))
        if kind == "alert":
            problems.extend(_alert_problems(rule, config, record_trees))
        elif not RECORD_NAME.match(name):
            problems.append(
                LintProblem(name, "rules/record-name", "recording rules are named level:metric:operations")
            )
        problems.extend(_expr_problems(name, str(rule["expr"]), records))
    return sorted(problems)


def lint(groups: Iterable[Group], config: AlertsConfig) -> list[LintProblem]:
    """Problems of the rule groups as the bundle renders them with `config`."""
    return lint_document({"groups": [group.render(config) for group in groups]}, config)


def lint_rule_file(path: Path, config: AlertsConfig | None = None) -> list[LintProblem]:
    """Problems of a written rules.yaml or prometheusrule.yaml (links checked against `config`)."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with `groups` (or a PrometheusRule)")
    return lint_document(data, config)
