"""The fast exposition parser against prometheus_client's on generated and mutated expositions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.vllm.compare import ours, reference

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- fuzzing -------------------------------------------------------------------------------------------

BASES = ["a", "foo", "foo_total", "vllm:x", "x_count", "b_bucket", ":odd", "_u", "sglang:y_total"]
SUFFIXES = ["", "", "", "_total", "_count", "_sum", "_bucket", "_created", "_gsum", "_gcount", "_info"]
TYPES = ["counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset"]
ODD_TYPES = ["gaugehistogram", "bogus", "counter extra", "Counter"]
LABEL_NAMES = ["le", "quantile", "engine", "model_name", "a", "_x", "a:b", '"q n"']
ODD_LABEL_NAMES = ["__name__", "__r", "", "a-b", '"unterminated']
VALUE_PIECES = ["a", " ", "\\\\", '\\"', "\\n", "\\t", "{", "}", ",", "=", "é", "日本", "#", "\u2028", "\r"]
NUMBERS = ["0", "1", "1.0", "-1.5e-3", "NaN", "nan", "+Inf", "-Inf", "inf", "1e400", "-0"]
ODD_NUMBERS = ["1_0", "0x1", "", "x", "\\", '"1"', "1{"]
STAMPS = ["", "", "", " 1700000000000", " -1", " 1.5", " 1e3"]
ODD_STAMPS = [" x", " 1_0", " 1 2", "\t1", " " + "9" * 400]
TRICKY = [*'{}"\\,= \t#_x1\n', "\u2028", "\xa0", "\r"]


names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,6}", fullmatch=True)
label_values = st.one_of(
    st.lists(st.sampled_from(VALUE_PIECES), max_size=5).map("".join),
    st.text(max_size=6).map(lambda t: t.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")),
)
numbers = st.one_of(
    st.sampled_from(NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
)
help_texts = st.text(max_size=12).map(lambda t: t.replace("\n", "\\n"))


def pick(draw: st.DrawFn, wild: bool, common: st.SearchStrategy[str], odd: list[str]) -> str:
    """Usually a valid choice; in a wild exposition one time in eight an odd one, which may not parse."""
    if wild and not draw(st.integers(0, 7)):
        return draw(st.sampled_from(odd))
    return draw(common)


@st.composite
def sample_lines(draw: st.DrawFn, base: str, wild: bool) -> str:
    name = base + draw(st.sampled_from(SUFFIXES)) if draw(st.integers(0, 5)) else draw(names)
    label_name = st.sampled_from(LABEL_NAMES) | names
    keys: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        key = pick(draw, wild, label_name, ODD_LABEL_NAMES)
        if wild or key not in keys:
            keys.append(key)
    labels = ",".join(f'{k}="{draw(label_values)}"' for k in keys) + draw(st.sampled_from(["", "", ","]))
    braces = f"{{{labels}}}" if keys or draw(st.booleans()) else ""
    separator = pick(draw, wild, st.just(" "), ["\t", "  ", ""])
    stamp = pick(draw, wild, st.sampled_from(STAMPS), ODD_STAMPS)
    return f"{name}{braces}{separator}{pick(draw, wild, numbers, ODD_NUMBERS)}{stamp}"


@st.composite
def family_blocks(draw: st.DrawFn, wild: bool) -> list[str]:
    base = draw(st.sampled_from(BASES) | names)
    typ = pick(draw, wild, st.sampled_from(TYPES), ODD_TYPES)
    header = []
    if draw(st.integers(0, 3)):
        header.append(f"# HELP {base} {draw(help_texts)}")
    if draw(st.integers(0, 3)):
        header.append(f"# TYPE {base} {typ}")
    if not draw(st.integers(0, 5)):
        header.append(f"# HELP {base} {draw(help_texts)}")
    lines = draw(st.permutations(header)) + draw(st.lists(sample_lines(base, wild), max_size=5))
    if not draw(st.integers(0, 6)):
        lines.insert(draw(st.integers(0, len(lines))), f"# TYPE {base} {typ}")
    return lines


@st.composite
def expositions(draw: st.DrawFn) -> str:
    wild = draw(st.booleans())
    lines: list[str] = []
    for block in draw(st.lists(family_blocks(wild), max_size=5)):
        lines += block
        if not draw(st.integers(0, 3)):
            lines.append(draw(st.sampled_from(["", "  ", "# source: x", "#", "# HELP", "# x y z", "\t"])))
    ending = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return ending.join(lines) + draw(st.sampled_from(["", ending]))


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(expositions())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.sampled_from(TRICKY))
        if how == "insert":
            text = text[:at] + char + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + char + text[at + 1 :]
    return text


@pytest.mark.slow
@FUZZ
@given(expositions())
def test_generated_expositions_agree(text: str) -> None:
    assert ours(text) == reference(text)


@pytest.mark.slow
@FUZZ
@given(mutated())
def test_mutated_expositions_agree_or_both_reject(text: str) -> None:
    assert ours(text) == reference(text)


@pytest.mark.slow
@FUZZ
@given(expositions(), st.sets(st.sampled_from(BASES + [b[:-6] for b in BASES if b.endswith("_total")])))
def test_keep_equals_filtered_result(text: str, wanted: set[str]) -> None:
    full = ours(text)
    if full is not None:
        assert ours(text, keep=lambda name: name in wanted) == [f for f in full if f[0] in wanted]
