"""The PromQL parser the linter reads rules with: names, the function around them, grouping, errors."""

from __future__ import annotations

import pytest

from servescope.bundle.alerts.promql import Call, PromQLError, Selector, parse_promql, walk


def _selectors(expr: str) -> list[tuple[str, str | None]]:
    return [
        (node.name, enclosing.name if enclosing else None)
        for node, enclosing in walk(parse_promql(expr))
        if isinstance(node, Selector)
    ]


def test_parser_finds_names_and_the_function_around_them() -> None:
    expr = (
        'sum by (instance) (increase(a_total{type=~"crc|x",le="0.5"}[10m] offset -5m)) or '
        "-b * on (instance, uuid) group_left (gpu) max_over_time(c[1h:5m] @ start()) "
        'and topk(3, d) unless e @ 1700000000 > bool 1e3 + Inf - 0x1f / count_values("v", f) '
        "atan2 (g) # a comment"
    )
    assert _selectors(expr) == [
        ("a_total", "increase"),
        ("b", None),
        ("c", "max_over_time"),
        ("d", "topk"),
        ("e", None),
        ("f", "count_values"),
        ("g", None),
    ]


def test_parser_reads_aggregation_grouping_before_and_after() -> None:
    before = parse_promql("sum without (pod) (x)")
    after = parse_promql("sum(x) by (le, model_name)")
    assert isinstance(before, Call) and before.grouping == ("without", ("pod",))
    assert isinstance(after, Call) and after.grouping == ("by", ("le", "model_name"))


def test_parser_label_matchers_are_not_names() -> None:
    # label names and values, even ones that look like metrics or keywords, are not selectors
    assert _selectors('x{by="servescope_nope_total", on!~"rate(y)", offset=~`z`}') == [("x", None)]


def test_parser_errors_name_what_is_wrong() -> None:
    with pytest.raises(PromQLError, match="unexpected end of expression"):
        parse_promql("sum(x")
