"""The bodies of a PATCH, applied as the API server applies them.

A merge patch (RFC 7386; a strategic merge patch of scalars and maps behaves the same) merges maps and
replaces everything else. A JSON patch (RFC 6902) is a list of operations applied in order, all or
nothing: `add`, `remove`, `replace` and `test` (a failed test, or a path that is not there, rejects the
whole patch with the API server's 422, and nothing is changed).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.kube.errors import ApiStatusError


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _rejected(message: str) -> ApiStatusError:
    return ApiStatusError(422, "Invalid", message)


def _tokens(path: Any) -> list[str]:
    if not isinstance(path, str) or not path.startswith("/"):
        raise _rejected(f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(document: Any, path: str) -> tuple[Any, str]:
    """The container holding the pointer's last token, and that token."""
    *parents, last = _tokens(path)
    node = document
    for token in parents:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise _rejected(f"doc is missing path: {path!r}")
    return node, last


def _get(document: Any, path: str) -> Any:
    node, last = _parent(document, path)
    if isinstance(node, dict) and last in node:
        return node[last]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        return node[int(last)]
    raise _rejected(f"doc is missing path: {path!r}")


def _apply(document: Any, operation: Any) -> None:
    if not isinstance(operation, dict):
        raise _rejected(f"a JSON patch operation is an object, got {operation!r}")
    op, path = operation.get("op"), operation.get("path")
    if op == "test":
        if _get(document, path) != operation.get("value"):
            raise _rejected(f"testing value {path} failed: test failed")
        return
    node, last = _parent(document, path)
    if op in {"remove", "replace"}:
        _get(document, path)  # both need the path to exist
    if op == "remove":
        node.pop(int(last) if isinstance(node, list) else last)
    elif op in ("add", "replace"):
        value = copy.deepcopy(operation.get("value"))
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            node[index : index + (op == "replace")] = [value]
        else:
            node[last] = value
    else:
        raise _rejected(f"unsupported JSON patch operation {op!r}")


def json_patch(document: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902 on a copy of `document`: the patched copy, or ApiStatusError 422 and nothing changed."""
    if not isinstance(operations, list):
        raise ApiStatusError(400, "BadRequest", "a JSON patch is a list of operations")
    patched = copy.deepcopy(document)
    for operation in operations:
        _apply(patched, operation)
    return patched
