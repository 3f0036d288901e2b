"""The `labelSelector` and `fieldSelector` query parameters of a list, as the API server reads them.

Label selectors take the whole grammar: `key`, `!key`, `key=value` (or `==`), `key!=value`,
`key in (a,b)` and `key notin (a,b)`, joined by commas (a comma inside parentheses belongs to the set).
A selector that does not parse is the API server's 400. Field selectors: `spec.nodeName` and
`metadata.name`, equality only (what servescope asks).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.support.kube.errors import ApiStatusError

Labels = dict[str, str]
_TERM = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s!=(),]+)"
    r"|(?P<key>[^\s!=(),]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*"
)


def _requirement(term: str) -> Callable[[Labels], bool]:
    found = _TERM.fullmatch(term)
    if found is None:
        raise ApiStatusError(400, "BadRequest", f"unable to parse requirement: {term!r}")
    if found["absent"]:
        absent = found["absent"]
        return lambda labels: absent not in labels
    key, op = found["key"], found["op"] or found["set"]
    if op in ("=", "=="):
        value = found["value"]
        return lambda labels: labels.get(key) == value
    if op == "!=":
        value = found["value"]
        return lambda labels: labels.get(key) != value
    if op is None:
        return lambda labels: key in labels
    values = {v.strip() for v in found["values"].split(",") if v.strip()}
    if not values:
        raise ApiStatusError(400, "BadRequest", f"unable to parse requirement: {term!r}: empty set")
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values  # notin: a missing key is not in the set


def _terms(selector: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for at, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:at])
            start = at + 1
    terms.append(selector[start:])
    return [t for t in terms if t.strip()]


def label_selector(selector: str) -> Callable[[Labels], bool]:
    """A predicate on an object's labels; ApiStatusError 400 when the selector does not parse."""
    requirements = [_requirement(term) for term in _terms(selector)]
    return lambda labels: all(requirement(labels) for requirement in requirements)


def selected(items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The items a list's `fieldSelector` and `labelSelector` keep."""
    for selector in query.get("fieldSelector", []):
        for term in selector.split(","):
            name, _, value = term.partition("=")
            if name == "spec.nodeName":
                items = [i for i in items if (i.get("spec") or {}).get("nodeName") == value]
            elif name == "metadata.name":
                items = [i for i in items if i["metadata"]["name"] == value]
    for selector in query.get("labelSelector", []):
        matches = label_selector(selector)
        items = [i for i in items if matches(i["metadata"].get("labels") or {})]
    return items
