"""A value as a PromQL string literal, so that a label value or a name can never become PromQL."""

from __future__ import annotations

_SIMPLE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def promql_string(value: str) -> str:
    """`value` as a PromQL (Go-syntax) double-quoted string literal."""
    out = []
    for ch in value:
        if ch in _SIMPLE:
            out.append(_SIMPLE[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
