"""Every threshold and bound a runbook page or a dashboard shows comes from the config the rules use.

The ground truth is the config: the pages and dashboards are rendered with `MUTATED`, a config whose
every threshold differs from the defaults. A value written as a literal instead of taken from the config
stays at its default there, and is found; a value taken from the config follows it. Where a page's number
equals a default by coincidence (the batch controller's x0.8 step is not the SM-activity bound 0.8),
`COINCIDENCES` says so and counts it.
Every `le` bucket a page or panel queries must be one of the config's SLO bounds: a query on another
bucket than the rule's reads a different SLI than the one that pages.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from servescope.bundle.alerts.bundle import all_alerts
from servescope.bundle.alerts.bundle import render_all as render_rules
from servescope.bundle.dashboards.build import names, render
from servescope.core.config import DURATION_SUFFIXES, AlertsConfig
from servescope.core.config_text import FORMATS, config_value
from servescope.runbooks.document import read_page, runbook_paths
from servescope.runbooks.settings import SHIPPED_RUNBOOKS
from tests.bundle.coincidences import COINCIDENCES
from tests.bundle.literals import FORMS, find

DEFAULT = AlertsConfig()
# Every value differs from every default of FORMS (test_mutated_values_are_distinct checks it).
MUTATED = AlertsConfig.model_validate(
    {
        "gpu_saturated_ratio": 0.915,
        "gpu_saturated_sm_active_ratio": 0.835,
        "kv_pressure_ratio": 0.765,
        "kv_anomaly_sigmas": 4.5,
        "kv_anomaly_min_stddev": 0.035,
        "availability_objective": 0.975,
        "blind_share": 0.35,
        "leak_min_bytes_per_minute": 6 * 2**20,
        "leak_min_load_stddev": 0.0125,
        "leak_load_wander": 0.0275,
        "capacity_regression_drop": 0.13,
        "slo_objective": 0.985,
        "slo_latency_le": "0.65",
        "slo_e2e_latency_le": "45.0",
        "p99_threshold_seconds": 0.65,
        "queue_ratio": 1.25,
        "preemptions_per_second": 0.45,
        "underutilised_ratio": 0.42,
        "capacity_buffer_ratio": 0.17,
        "request_error_ratio": 0.045,
        "request_error_min_rate": 0.15,
        "endpoints_ratio": 0.62,
        "memory_headroom_ratio": 0.07,
        "memory_headroom_budget_share": 0.4,
        "over_budget_bytes": 2 * 2**30,
        "over_budget_ratio": 0.025,
        "pcie_link_busy_ratio": 0.55,
        "exhaustion_seconds": 5400,
        "source_stale_min_seconds": 90,
        "canary": {
            "min_requests": 800,
            "latency_ratio": 1.75,
            "slo_miss_increase": 0.0075,
            "error_increase": 0.025,
        },
    }
)
PAGES = {path.name: path for path in runbook_paths(SHIPPED_RUNBOOKS)}
BOUNDS_LE = re.compile(r'(?<![\w])le=\\?"([^"\\]+)\\?"')


@cache
def page(name: str, cfg: AlertsConfig) -> str:
    return read_page(PAGES[name], cfg)


# What a dashboard says to a reader: its words, its queries and the thresholds it draws (not its layout:
# a heatmap's `exponent: 0.5` is no SLO).
_SAID = ("title", "description", "expr", "legendFormat", "url")


def _said(node: object, key: str = "") -> list[str]:
    if isinstance(node, dict):
        return [line for k, value in sorted(node.items()) for line in _said(value, k)]
    if isinstance(node, list):
        return [line for item in node for line in _said(item, key)]
    if key in _SAID and isinstance(node, str):
        return [f"{key}: {node}"]
    if key == "value" and isinstance(node, int | float) and not isinstance(node, bool):
        return [f"threshold: {node}"]
    return []


@cache
def dashboard(name: str, cfg: AlertsConfig) -> str:
    return "\n".join(_said(render(name, cfg)))


def test_mutated_values_are_distinct() -> None:
    defaults = {float(config_value(DEFAULT, f)) for f in FORMS}
    for field in FORMS:
        mutated = float(config_value(MUTATED, field))
        assert mutated not in defaults, f"{field}: {mutated} equals a default; pick another"


def _literals(name: str, text_mutated: str) -> list[str]:
    """Why `name` (a page or a dashboard) does not follow the config: a field's default still written
    there (beyond its listed coincidences) under a config that changed it. Empty when every one followed."""
    problems = []
    for field in FORMS:
        left, allowed = find(text_mutated, field, DEFAULT), COINCIDENCES.get((name, field), (0, ""))[0]
        if len(left) != allowed:
            default = config_value(DEFAULT, field)
            problems.append(
                f"{field}: {len(left)} literal(s) equal to the default {default!r} ({allowed} listed): {left}"
            )
    return problems


@pytest.mark.parametrize("name", sorted(PAGES))
def test_runbook_page_takes_every_threshold_from_the_config(name: str) -> None:
    problems = _literals(name, page(name, MUTATED))
    assert not problems, f"{name}: write these as {{{{ config.<field> }}}}:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", names())
def test_dashboard_takes_every_threshold_from_the_config(name: str) -> None:
    problems = _literals(name, dashboard(name, MUTATED))
    assert not problems, f"dashboard {name}: take these from the config:\n" + "\n".join(problems)


def test_every_coincidence_is_still_there() -> None:
    """A coincidence that no longer occurs is removed from the list, so the list cannot hide a copy."""
    stale = []
    for (name, field), (count, _) in COINCIDENCES.items():
        text = page(name, MUTATED) if name in PAGES else dashboard(name, MUTATED)
        if len(find(text, field, DEFAULT)) != count:
            stale.append(f"{name} {field}: {len(find(text, field, DEFAULT))} found, {count} listed")
    assert not stale, stale


def _buckets(text: str) -> set[str]:
    return set(BOUNDS_LE.findall(text)) - {"+Inf"}


def test_every_queried_bucket_is_a_bound_of_the_config() -> None:
    """A page or panel that queries `le="0.5"` while the rule's bound is another reads a different SLI."""
    bounds = {MUTATED.slo_latency_le, MUTATED.slo_e2e_latency_le}
    rules = "".join(render_rules(MUTATED).values())
    assert _buckets(rules) == bounds, "the rules themselves must use exactly the config's bounds"
    wrong = {
        **{name: _buckets(page(name, MUTATED)) - bounds for name in PAGES},
        **{name: _buckets(dashboard(name, MUTATED)) - bounds for name in names()},
    }
    wrong = {name: found for name, found in wrong.items() if found}
    assert not wrong, f"buckets that are not the config's bounds {sorted(bounds)}: {wrong}"


def test_the_e2e_pages_state_the_rules_bound() -> None:
    """The end-to-end burn pages name and query the end-to-end bound, not the time-to-first-token one."""
    for name in ("ServescopeE2eSloBurnFast.md", "ServescopeE2eSloBurnSlow.md"):
        text = page(name, MUTATED)
        assert f'le="{MUTATED.slo_e2e_latency_le}"' in text, name
        assert f"{float(MUTATED.slo_e2e_latency_le):g} s" in text, name
        assert f"{float(MUTATED.slo_latency_le):g} s" not in text, name


def test_pages_folder_is_the_shipped_one() -> None:
    assert Path(SHIPPED_RUNBOOKS).is_dir() and len(PAGES) >= 40


def _durations() -> AlertsConfig:
    """The defaults with every duration setting at its own odd number of minutes (7m, 9m, 11m...)."""
    cfg, minutes = DEFAULT, 7
    for field in type(DEFAULT).model_fields:
        if field.endswith(DURATION_SUFFIXES):
            try:
                cfg = AlertsConfig.model_validate({**cfg.model_dump(), field: f"{minutes}m"})
            except ValueError:
                continue  # a duration the config restricts (exhaustion_window: 5m or 30m)
            minutes += 2
    return cfg


DURATIONS = _durations()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_duration_setting_a_page_names_is_the_configured_one(name: str) -> None:
    """A page that names a duration setting (`endpoint_down_window`) states its value from the config."""
    lines = page(name, DURATIONS).splitlines()
    wrong = []
    for number, line in enumerate(lines):
        for field in re.findall(r"`([a-z_]+)`", line):
            if not field.endswith(DURATION_SUFFIXES) or field not in type(DEFAULT).model_fields:
                continue
            said = " ".join(lines[max(0, number - 1) : number + 1])
            default, configured = (FORMATS["words"](config_value(c, field)) for c in (DEFAULT, DURATIONS))
            if configured == default:
                continue
            if re.search(rf"(?<![\d.]){re.escape(default)}\b", said) or configured not in said:
                wrong.append(f"line {number + 1}: `{field}` ({default} by default) said as: {line.strip()!r}")
    assert not wrong, f"{name}: write these as {{{{ config.<field> | words }}}}:\n" + "\n".join(wrong)


RULE_FOR = {alert.name: alert.for_ for alert in all_alerts(DURATIONS)}
OPENING_FOR = re.compile(r"^For (an? \w+|\d+ \w+)\b", re.MULTILINE)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_page_that_opens_with_how_long_says_its_rule_s_for(name: str) -> None:
    """An opening "For 15 minutes, ..." is the rule's `for`, under any config."""
    said = OPENING_FOR.findall(page(name, DURATIONS))
    rule = RULE_FOR.get(name.removesuffix(".md"))
    if not said or rule is None:
        return  # the page does not open with how long (or has no rule of its own)
    opening = re.sub(r"^an? ", "1 ", said[0])  # "For an hour" is 1 hour
    assert opening == FORMATS["words"](rule), (
        f"{name}: opens with 'For {said[0]}', its rule's `for` is {rule}: "
        "write {{ config.<x>_for | words }}"
    )


RULE_FOR_DEFAULT = {alert.name: alert.for_ for alert in all_alerts(DEFAULT)}
FOR_PHRASE = re.compile(r"\b[Ff]or (an? \w+|\d+ \w+)\b")


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_meaning_never_copies_its_rule_s_for(name: str) -> None:
    """ "... has stayed above 0.7 for 5 minutes" in the Meaning's first paragraph is the rule's `for`."""
    alert = name.removesuffix(".md")
    if alert not in RULE_FOR or RULE_FOR[alert] == RULE_FOR_DEFAULT[alert]:
        return  # no rule, or a `for` no setting moves (a constant of the rule)
    meaning = page(name, DURATIONS).split("## Meaning", 1)[-1].strip().split("\n\n", 1)[0]
    copied = FORMATS["words"](RULE_FOR_DEFAULT[alert])
    said = [re.sub(r"^an? ", "1 ", phrase) for phrase in FOR_PHRASE.findall(meaning)]
    assert copied not in said, (
        f"{name}: 'for {copied}' is a copy of the rule's `for`: write {{{{ config.<x>_for | words }}}}"
    )
