"""An offline rule linter: what pint would catch, for the bundle's rules (pint is not installable here).

`lint(groups, config)` checks the rules as the bundle renders them; `lint_rule_file(path)` checks a
written rules.yaml (or the PrometheusRule). Every problem names the rule, a check id and what is wrong:

- alerts/severity, alerts/summary, alerts/description, alerts/runbook-url, alerts/dashboard-url: the
  labels and annotations every alert carries (summary static, runbook under <base>/runbooks/<Alert>);
- alerts/for: `for` present, 0s..6h, and 0 only for Watchdog;
- alerts/labels-template: no templating (`{{`, `$value`) in labels: it resets `for` on every change;
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
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import SEVERITIES, Group

WATCHDOG = "ServescopeWatchdog"
ALERT_PREFIX = "Servescope"
MAX_FOR_SECONDS = 6 * 3600
PROMETHEUS_OWN = frozenset({"up", "ALERTS", "ALERTS_FOR_STATE"})
COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase", "resets"})
# These read whether a series exists, never its value: a counter inside them is fine.
PRESENCE_FUNCTIONS = frozenset({"absent", "absent_over_time", "present_over_time"})
RATE_FUNCTIONS = frozenset({"rate", "irate", "increase"})
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
AGGREGATORS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
ALERT_NAME = re.compile(rf"^{ALERT_PREFIX}(?:[A-Z][a-z0-9]*)+$")
RECORD_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+$")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


@dataclass(frozen=True, order=True)
class LintProblem:
    rule: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: [{self.check}] {self.message}"


# --- PromQL: a tokenizer and a small parser, enough to find metric names and what they sit in ----------


class PromQLError(ValueError):
    pass


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:\d+(?:ms|s|m|h|d|w|y))+(?![\w.])|0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>=(){},@])
    """,
    re.VERBOSE,
)
_BINARY_SYMBOLS = frozenset({"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<="})
_BINARY_WORDS = frozenset({"and", "or", "unless", "atan2"})
_MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokenize(expr: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if not match or match.lastgroup is None:
            raise PromQLError(f"unexpected character {expr[pos]!r} at offset {pos}")
        if match.lastgroup != "space":
            tokens.append(Token(match.lastgroup, match.group()))
        pos = match.end()
    return tokens


@dataclass
class Node:
    children: list[Node] = field(default_factory=list)


@dataclass
class Selector(Node):
    name: str = ""
    matchers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call(Node):
    """A function call or an aggregation; `grouping` is ("by"|"without", labels) for aggregations."""

    name: str = ""
    grouping: tuple[str, tuple[str, ...]] | None = None


@dataclass
class Range(Node):
    """`x[5m]`, a subquery `x[1h:5m]`, or a modifier (offset, @) around one child."""


class _Parser:
    def __init__(self, expr: str) -> None:
        self.tokens = tokenize(expr)
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def is_next(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.kind in ("op", "ident") and token.text.lower() in texts

    def take(self, kind: str | None = None, text: str | None = None) -> Token:
        token = self.peek()
        if token is None:
            raise PromQLError(f"unexpected end of expression, expected {text or kind}")
        if (kind and token.kind != kind) or (text and token.text.lower() != text):
            raise PromQLError(f"unexpected {token.text!r}, expected {text or kind}")
        self.pos += 1
        return token

    def parse(self) -> Node:
        node = self.expr()
        if self.peek() is not None:
            raise PromQLError(f"unexpected {self.tokens[self.pos].text!r} after the expression")
        return node

    def expr(self) -> Node:
        operands = [self.unary()]
        while (token := self.peek()) is not None and (
            (token.kind == "op" and token.text in _BINARY_SYMBOLS)
            or (token.kind == "ident" and token.text.lower() in _BINARY_WORDS)
        ):
            self.pos += 1
            if self.is_next("bool"):
                self.pos += 1
            if self.is_next("on", "ignoring"):
                self.pos += 1
                self.labels()
            if self.is_next("group_left", "group_right"):
                self.pos += 1
                if self.is_next("("):
                    self.labels()
            operands.append(self.unary())
        return operands[0] if len(operands) == 1 else Node(operands)

    def unary(self) -> Node:
        if self.is_next("-", "+"):
            self.pos += 1
            return self.unary()
        node = self.primary()
        while True:
            token = self.peek()
            if token is not None and token.kind == "range":
                self.pos += 1
                node = Range([node])
            elif self.is_next("offset"):
                self.pos += 1
                if self.is_next("-"):
                    self.pos += 1
                self.take("number")
                node = Range([node])
            elif self.is_next("@"):
                self.pos += 1
                if self.is_next("start", "end"):
                    self.pos += 1
                    self.take("op", "(")
                    self.take("op", ")")
                else:
                    self.take("number")
                node = Range([node])
            else:
                return node

    def primary(self) -> Node:
        token = self.take()
        if token.kind in ("number", "string"):
            return Node()
        if token.kind == "op" and token.text == "(":
            inner = self.expr()
            self.take("op", ")")
            return Node([inner])
        if token.kind == "op" and token.text == "{":
            matchers = self.matchers()
            return Selector(name=matchers.get("__name__", ""), matchers=matchers)
        if token.kind != "ident":
            raise PromQLError(f"unexpected {token.text!r}")
        name = token.text
        if name.lower() in ("inf", "nan"):
            return Node()
        if name.lower() in AGGREGATORS and self.is_next("by", "without", "("):
            return self.aggregation(name.lower())
        if self.is_next("("):
            self.pos += 1
            return Call(self.arguments(), name=name)
        matchers = {}
        if self.is_next("{"):
            self.pos += 1
            matchers = self.matchers()
        return Selector(name=name, matchers=matchers)

    def aggregation(self, name: str) -> Call:
        grouping = self.grouping() if self.is_next("by", "without") else None
        self.take("op", "(")
        args = self.arguments()
        if grouping is None and self.is_next("by", "without"):
            grouping = self.grouping()
        return Call(args, name=name, grouping=grouping)

    def grouping(self) -> tuple[str, tuple[str, ...]]:
        kind = self.take("ident").text.lower()
        return kind, self.labels()

    def arguments(self) -> list[Node]:
        """After `(`: comma-separated expressions up to `)`."""
        args: list[Node] = []
        if self.is_next(")"):
            self.pos += 1
            return args
        while True:
            args.append(self.expr())
            if self.is_next(","):
                self.pos += 1
                continue
            self.take("op", ")")
            return args

    def labels(self) -> tuple[str, ...]:
        self.take("op", "(")
        names: list[str] = []
        while not self.is_next(")"):
            names.append(self.take("ident").text)
            if not self.is_next(","):
                break
            self.pos += 1
        self.take("op", ")")
        return tuple(names)

    def matchers(self) -> dict[str, str]:
        """After `{`: label matchers up to `}`."""
        found: dict[str, str] = {}
        while not self.is_next("}"):
            label = self.take("ident").text
            op = self.take("op")
            if op.text not in _MATCH_OPS:
                raise PromQLError(f"unexpected {op.text!r} in label matchers")
            found[label] = self.take("string").text[1:-1]
            if not self.is_next(","):
                break
            self.pos += 1
        self.take("op", "}")
        return found


def parse_promql(expr: str) -> Node:
    """A tree of the expression: Selectors, Calls (functions and aggregations), Ranges, other Nodes."""
    return _Parser(expr).parse()


def walk(node: Node, enclosing: Call | None = None) -> Iterator[tuple[Node, Call | None]]:
    """Every node, with the innermost function or aggregation it sits in (parentheses do not count)."""
    yield node, enclosing
    inner = node if isinstance(node, Call) else enclosing
    for child in node.children:
        yield from walk(child, inner)


def _unwrap(node: Node) -> Node:
    """Through parentheses, ranges and modifiers to what they hold."""
    while type(node) in (Node, Range) and len(node.children) == 1:
        node = node.children[0]
    return node


# --- what exists ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metrics:
    """Names servescope exports, with the kind of each (histogram samples are counters)."""

    kinds: dict[str, str]

    def known(self, name: str) -> bool:
        return name in self.kinds or name in PROMETHEUS_OWN or _vllm_alias(name)


@cache
def exported_metrics() -> Metrics:
    from servescope.catalog import CATALOG
    from servescope.exporter.dcgm.counters import load_counters, specs_of

    kinds: dict[str, str] = {}
    for spec in (*CATALOG, *specs_of(load_counters())):
        kind = str(spec.kind)
        if kind == "histogram":
            for suffix in HISTOGRAM_SUFFIXES:
                kinds[spec.name + suffix] = "counter"
        else:
            kinds[spec.name] = kind
    return Metrics(kinds)


def _vllm_alias(name: str) -> bool:
    """A vLLM (or SGLang, TensorRT-LLM, TGI) name servescope understands, with any of its prefixes."""
    from servescope.exporter.vllm.aliases import lookup, split_name

    split = split_name(name)
    if split is None:
        return False
    backend, base = split
    candidates = [base, *(base.removesuffix(s) for s in HISTOGRAM_SUFFIXES if base.endswith(s))]
    return any(lookup(backend, candidate) is not None for candidate in candidates)


def is_counter(name: str, metrics: Metrics, records: set[str]) -> bool:
    if name in records or name in PROMETHEUS_OWN:
        return False
    if name in metrics.kinds:
        return metrics.kinds[name] == "counter"
    return name.endswith(("_total", *HISTOGRAM_SUFFIXES))


# --- the checks ----------------------------------------------------------------------------------------


def duration_seconds(text: str) -> float:
    if not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a Prometheus duration")
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def _templated(text: str) -> bool:
    return "{{" in text or "$value" in text


def _alert_problems(rule: dict[str, Any], config: AlertsConfig) -> Iterator[LintProblem]:
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


def _for_problems(name: str, for_: Any) -> Iterator[LintProblem]:
    if for_ is None:
        yield LintProblem(name, "alerts/for", "`for` missing: one bad scrape would fire the alert")
        return
    try:
        seconds = duration_seconds(str(for_))
    except ValueError as exc:
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
        target = _unwrap(node.children[0])
        if isinstance(target, Selector) and metrics.kinds.get(target.name) == "gauge":
            yield LintProblem(
                name, "promql/rate-gauge", f"{function}() over gauge {target.name}: use deriv() or delta()"
            )
    if function == "histogram_quantile":
        if len(node.children) != 2:
            yield LintProblem(name, "promql/syntax", "histogram_quantile takes two arguments")
            return
        buckets = _unwrap(node.children[1])
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


def lint_document(document: dict[str, Any], config: AlertsConfig | None = None) -> list[LintProblem]:
    """Problems of a rule file's content ({groups: [...]}, or a PrometheusRule), sorted."""
    config = config or AlertsConfig()
    rules = [rule for _, rule in _rules(document)]
    records = {str(rule["record"]) for rule in rules if "record" in rule}
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
            problems.extend(_alert_problems(rule, config))
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
