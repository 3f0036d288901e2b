"""Running the real promtool on the built rules, and the pieces every alert test case needs.

Each test module lists its promtool test groups in a module-level `CASES` (a list of promtool `tests:`
entries) and runs them with `run_promtool(CASES, tmp_path)`; `test_coverage.py` reads every module's
CASES to check that each alert has a firing, a silent-before-`for` and a recovered case.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import yaml

from bench.quality.rule_engine import promtool_env
from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.alerts.bundle import all_alerts, groups
from servescope.bundle.alerts.model import BUNDLE_LABEL
from servescope.core.config import AlertsConfig

ROOT = Path(__file__).resolve().parents[2]
BUILD = ALERTS_BUILD
RULES = BUILD / "rules.yaml"
CONFIG = AlertsConfig()
ALERTS = {alert.name: alert for alert in all_alerts(CONFIG)}
GROUP_ORDER = [group.name for group in groups(CONFIG)]
# What the exporter's series carry once Prometheus scraped them (job and instance of the target).
TARGET = {"job": "servescope", "instance": "node-a:9108"}
GPU = {**TARGET, "gpu": "0", "uuid": "GPU-0000", "hostname": "node-a"}
ENGINE = {**TARGET, "model_name": "deepseek", "engine": "0", "endpoint": "http://10.0.0.1:8000/metrics"}
ON_GPU = "node-a GPU 0 (GPU-0000)"
# What `sum by`/`max by (instance, hostname, gpu, uuid)` keeps of a GPU's labels.
GPU_BY = {k: GPU[k] for k in ("instance", "hostname", "gpu", "uuid")}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    """One promtool input series: `name{labels}` with expanding-notation values."""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def series_of(labels: dict[str, str], values: dict[str, str]) -> list[dict[str, str]]:
    """The input series of one target: `values` maps each metric name to its expanding-notation values."""
    return [series(name, labels, metric_values) for name, metric_values in values.items()]


def links(alert_name: str, labels: dict[str, str]) -> dict[str, str]:
    """runbook_url and dashboard_url as the alert renders them for `labels` (Go's urlquery escaping)."""
    alert = ALERTS[alert_name]
    query = "&".join(f"{k}={quote_plus(labels.get(k, ''))}" for k in alert.keys)
    dash_query = "&".join(f"var-{k}={quote_plus(labels.get(k, ''))}" for k in alert.dashboard_keys)
    runbook = f"{CONFIG.runbook_base_url}/runbooks/{alert_name}" + (f"?{query}" if query else "")
    board = alert.dashboard_url(CONFIG).split("?")[0] + (f"?{dash_query}" if dash_query else "")
    return {"runbook_url": runbook, "dashboard_url": board}


def firing(alert_name: str, labels: dict[str, str], description: str) -> dict[str, Any]:
    """One expected alert: its labels (severity added) and all four annotations."""
    alert = ALERTS[alert_name]
    return {
        "exp_labels": {**labels, "severity": alert.severity, **BUNDLE_LABEL, **alert.labels},
        "exp_annotations": {
            "summary": alert.summary,
            "description": description,
            **links(alert_name, labels),
        },
    }


def case(
    name: str,
    inputs: list[dict[str, str]],
    *checks: dict[str, Any],
    interval: str = "1m",
    exprs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A promtool test group: its input series (sampled every `interval`), alert checks and, if any,
    PromQL checks (`promql_expr_test`)."""
    group = {"name": name, "interval": interval, "input_series": inputs, "alert_rule_test": list(checks)}
    return group if exprs is None else {**group, "promql_expr_test": exprs}


def check(alert_name: str, eval_time: str, *expected: dict[str, Any]) -> dict[str, Any]:
    """An alert_rule_test entry; no `expected` asserts silence at that time."""
    return {"eval_time": eval_time, "alertname": alert_name, "exp_alerts": list(expected)}


def never(alert_name: str, at: str, span: str, matchers: str = "") -> dict[str, Any]:
    """A promql_expr_test entry: `alert_name` (its series that `matchers` select, such as `, gpu!="1"`)
    was not even pending at any evaluation of the `span` before `at`."""
    alerts = f'ALERTS{{alertname="{alert_name}"{matchers}}}'
    return {"expr": f"max_over_time({alerts}[{span}])", "eval_time": at, "exp_samples": []}


def fires(alert_name: str, eval_time: str, labels: dict[str, str], description: str) -> dict[str, Any]:
    """An alert_rule_test entry: `alert_name` fires once at `eval_time`, on `labels`, with `description`."""
    return check(alert_name, eval_time, firing(alert_name, labels, description))


NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# An expression that reads these depends on every alert of the bundle...
EVERY_ALERT = {"ALERTS", "ALERTS_FOR_STATE"}
# ...unless each time it reads them it names the alert: then it depends on that alert alone.
ONE_ALERT = re.compile(r'\bALERTS(?:_FOR_STATE)?\{alertname="([A-Za-z0-9_:]+)"')


def names_in_case(expr: str) -> set[str]:
    """The names a case's expression reads: an `ALERTS{alertname="X"...}` reads alert X's rule only."""
    named = ONE_ALERT.findall(expr)
    names = set(NAME.findall(expr))
    if len(named) == len(re.findall(r"\bALERTS(?:_FOR_STATE)?\b", expr)):
        names = (names - EVERY_ALERT) | set(named)
    return names


def names_read(rule: dict[str, Any]) -> set[str]:
    """Every name its expression and templates (a template may `query`) could read."""
    texts = [rule["expr"], *rule.get("annotations", {}).values(), *rule.get("labels", {}).values()]
    return {name for text in texts for name in NAME.findall(str(text))}


@functools.lru_cache(maxsize=8)
def _parsed(rules: Path, mtime_ns: int) -> dict[str, Any]:
    """A rules file parsed once per version (read-only: callers build new documents from it)."""
    document: dict[str, Any] = yaml.safe_load(rules.read_text())
    return document


def groups_needed_by(tests: list[dict[str, Any]], rules: Path, tmp_path: Path) -> Path:
    """`rules` cut down to the groups the cases depend on: the groups of the alerts they check and of
    every recording rule those (or the cases' expressions) read, transitively; all of them once anything
    reads ALERTS. The other groups cannot change what the cases see, and evaluating them at every step of
    days of series is most of promtool's time. The rules kept are the built ones, unchanged."""
    document = _parsed(rules, rules.stat().st_mtime_ns)
    groups = document["groups"]
    # A name may be recorded (or alerted on) in several groups: every one of them is kept.
    owners: dict[str, set[str]] = {}
    for group in groups:
        for rule in group["rules"]:
            owners.setdefault(rule.get("alert") or rule["record"], set()).add(group["name"])
    names = {check["alertname"] for test in tests for check in test.get("alert_rule_test", [])}
    names |= {n for test in tests for e in test.get("promql_expr_test", []) for n in names_in_case(e["expr"])}
    kept: set[str] = set()
    while not names & EVERY_ALERT and (new := set().union(*(owners.get(n, set()) for n in names)) - kept):
        kept |= new
        names |= {
            name
            for group in groups
            if group["name"] in new
            for rule in group["rules"]
            for name in names_read(rule)
        }
    if names & EVERY_ALERT:
        return rules
    needed = {**document, "groups": [group for group in groups if group["name"] in kept]}
    path = tmp_path / "rules_needed.yaml"
    path.write_text(yaml.safe_dump(needed, sort_keys=False, width=200))
    return path


def run_promtool(
    tests: list[dict[str, Any]], tmp_path: Path, evaluation_interval: str = "1m", rules: Path = RULES
) -> str:
    """Run `promtool test rules` on the built rules (or `rules`); fails the test with promtool's report."""
    promtool = shutil.which("promtool")
    assert promtool, (
        "promtool missing: `make test` installs Debian prometheus (scripts/install-debian-tools.sh)"
    )
    path = tmp_path / "rules_test.yaml"
    document = {
        "rule_files": [str(groups_needed_by(tests, rules, tmp_path))],
        "evaluation_interval": evaluation_interval,
        # Recording groups first, as listed in the bundle: without an order promtool evaluates groups
        # in a random one, and an alert could read a recording rule's value from the previous step.
        "group_eval_order": GROUP_ORDER,
        "tests": tests,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=200))
    # A bound for a hung promtool, not a speed claim: the leak cases evaluate a day and a half of minutes
    # (about 80 s of CPU) and took over 300 s beside the suite on a machine at a load of 10.
    result = subprocess.run(
        [promtool, "test", "rules", str(path)],
        env=promtool_env(),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
