"""The example rule the linter tests change one thing of, and the checks the linter reports for it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from servescope.bundle.alerts.lint import lint, lint_document
from servescope.bundle.alerts.model import GPU_KEYS, Alert, Group, Record
from servescope.core.config import AlertsConfig

CONFIG = AlertsConfig()
GOOD = Alert(
    "ServescopeLintExample",
    'servescope_gpu_up{job="servescope"} == 0',
    "5m",
    "warning",
    "A GPU is lost.",
    "{{ $labels.hostname }} GPU {{ $labels.gpu }} is lost.",
    GPU_KEYS,
    "gpu",
)


def checks(*rules: Alert | Record, config: AlertsConfig = CONFIG) -> set[str]:
    """The checks the linter reports for a group of `rules`."""
    return {problem.check for problem in lint([Group("test", rules)], config)}


def expr_checks(expr: str) -> set[str]:
    """The checks the linter reports for GOOD with `expr` as its expression."""
    return checks(replace(GOOD, expr=expr))


def rendered(**changes: Any) -> dict[str, Any]:
    """GOOD as rules.yaml holds it, with top-level keys changed (None deletes the key)."""
    rule = GOOD.render(CONFIG)
    for key, value in changes.items():
        if value is None:
            rule.pop(key, None)
        else:
            rule[key] = value
    return rule


def document_checks(*rules: dict[str, Any]) -> set[str]:
    """The checks the linter reports for a rule file holding `rules` in one group."""
    return {problem.check for problem in lint_document({"groups": [{"name": "t", "rules": list(rules)}]})}
