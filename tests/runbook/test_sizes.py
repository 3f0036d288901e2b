"""The house sizes hold in the runbook package: modules under 300 lines, functions under 40."""

from __future__ import annotations

import ast
from pathlib import Path

import servescope.runbooks as runbooks_package

PACKAGE = Path(runbooks_package.__file__).resolve().parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_300_lines() -> None:
    assert MODULES, PACKAGE
    long = {str(p.relative_to(PACKAGE)): n for p in MODULES if (n := len(p.read_text().splitlines())) > 300}
    assert not long, long


def test_no_function_is_over_40_lines() -> None:
    long: dict[str, int] = {}
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 40:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = length
    assert not long, long
