"""The house sizes hold everywhere (the package, its tests, the benches): no module over 300 lines, no
function over 40 unless a comment opening its body says why it is long."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES = 300
FUNCTION_LINES = 40


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # Generated from the kubelet's proto by protoc: not written here, not held to the house sizes.
    return [ROOT / name for name in listed if not name.endswith("_pb2.py") and (ROOT / name).exists()]


def _says_why(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A comment line between the signature's end and the first statement of the body."""
    body_start = node.body[0].lineno - 1
    signature_end = max(node.lineno, getattr(node.args, "end_lineno", None) or node.lineno)
    opening = lines[signature_end - 1 : body_start + 1]
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
        opening = lines[signature_end - 1 : node.body[1].lineno]  # a docstring, then the comment
    return any(line.strip().startswith("#") for line in opening)


def test_the_tree_has_python_files_to_check() -> None:
    names = {path.relative_to(ROOT).parts[0] for path in _python_files()}
    assert {"servescope", "tests", "bench"} <= names, names


def test_no_module_is_over_300_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in _python_files()
        if (count := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert not long, long


def test_no_function_is_over_40_lines_without_saying_why() -> None:
    long: dict[str, int] = {}
    for path in _python_files():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES and not _says_why(lines, node):
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = length
    assert not long, long
