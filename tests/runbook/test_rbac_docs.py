"""docs/kubernetes.md lists every verb the runbook service's RBAC grants, with the step needing it."""

from __future__ import annotations

from pathlib import Path

from servescope.deploy.runbook_rbac import CLUSTER_RULES, NAMESPACED_RULES

DOC = Path(__file__).parents[2] / "docs" / "kubernetes.md"
CORE = '""'


def test_the_rbac_table_is_the_rendered_rules() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(("| ClusterRole |", "| Role ("))]
    kinds = (("ClusterRole", CLUSTER_RULES), ("Role (each `--serving-namespace`)", NAMESPACED_RULES))
    expected = [
        f"| {kind} | `{group or CORE}` | `{resource}` | {', '.join(verbs)} | {steps} |"
        for kind, rules in kinds
        for group, resource, verbs, steps in rules
    ]
    assert rows == expected
