"""The house sizes hold everywhere (the package, the simulator, the tests, the benches): no module over
300 lines, no function over 40 unless a comment opening its body says why it is long."""

from __future__ import annotations

import ast
import subprocess
import tokenize
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


def _header_end(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The line of the colon that closes the signature: ast gives `arguments` no end line, and a
    comment may sit after the last parameter, inside the brackets."""
    source = iter(line + "\n" for line in lines[node.lineno - 1 :])
    depth = 0
    for token in tokenize.generate_tokens(lambda: next(source, "")):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.exact_type == tokenize.COLON and depth == 0:
            return node.lineno + token.start[0] - 1
    raise AssertionError(f"no colon closes the signature of {node.name} at line {node.lineno}")


def _says_why(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A comment line between the signature's end (or the docstring's) and the next statement."""
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
        opening = lines[first.end_lineno or first.lineno : node.body[1].lineno - 1]
    else:
        opening = lines[_header_end(lines, node) : first.lineno - 1]
    return any(line.strip().startswith("#") for line in opening)


def test_the_tree_has_python_files_to_check() -> None:
    names = {path.relative_to(ROOT).parts[0] for path in _python_files()}
    assert {"servescope", "sim", "tests", "bench"} <= names, names


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


def _reason_found(source: str) -> bool:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return _says_why(source.splitlines(), node)


def test_only_a_comment_opening_the_body_says_why() -> None:
    assert _reason_found("def f(\n    a: int,\n) -> None:\n    # long: one table\n    pass\n")
    assert _reason_found('def f() -> None:\n    """Doc."""\n    # long: one table\n    pass\n')
    assert not _reason_found("def f(\n    a: int,\n    # a parameter\n) -> None:\n    pass\n")
    assert not _reason_found("def f(\n    a: int,  # a parameter\n) -> None:\n    pass\n")
    assert not _reason_found('def f() -> None:\n    """Doc.\n\n    # not a reason\n    """\n    pass\n')
    assert not _reason_found('def f() -> None:\n    """Doc."""\n    pass  # a tail\n    pass\n')
