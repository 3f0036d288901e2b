"""The fast exposition parser against prometheus_client's parser: fixtures, edge cases and fuzzing."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from servescope.core.exposition import (
    ExpositionError,
    ExpositionParser,
    ParsedFamily,
    parse_exposition,
)
from tests.helpers import SAMPLES
from tests.vllm.compare import Normalised, normalise, ours, reference

# Expositions only: the samples folder also holds captures that are not /metrics (process trees).
FIXTURES = sorted(
    p
    for p in SAMPLES.glob("*.txt")
    if p.name.startswith(("vllm-", "sglang-", "dcgm-exporter")) and not p.stem.endswith("-processes")
)

# -- fixtures ----------------------------------------------------------------------------------------


def test_fixtures_exist() -> None:
    assert len(FIXTURES) >= 4, f"expected the vLLM, SGLang and dcgm-exporter samples in {SAMPLES}"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_agrees_with_prometheus_client(path: Path) -> None:
    text = path.read_text()
    expected = reference(text)
    assert expected is not None
    assert ours(text) == expected


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_keep_on_fixture_is_the_filtered_full_result(path: Path) -> None:
    text = path.read_text()
    full = parse_exposition(text)

    def engine(name: str) -> bool:
        return name.startswith(("vllm:", "sglang:"))

    assert parse_exposition(text, keep=engine) == [f for f in full if engine(f.name)]


def test_fixture_result_shapes() -> None:
    families = {f.name: f for f in parse_exposition((SAMPLES / "vllm-0.32-cpu-idle.txt").read_text())}
    prompt = families["vllm:prompt_tokens"]
    assert prompt.type == "counter"
    assert [s.name for s in prompt.samples] == ["vllm:prompt_tokens_total"]
    assert isinstance(families["vllm:request_prompt_tokens"], ParsedFamily)
    assert families["vllm:prompt_tokens_created"].type == "gauge"


# -- prometheus_client's quirks, each checked against it -------------------------------------------------

EDGE_CASES = [
    # counters: the family loses `_total`, or its samples gain it; `_created` lines stand alone
    "# TYPE foo counter\nfoo 1\nfoo_total 2\nfoo_created 3",
    "# TYPE foo_total counter\nfoo_total 1\nfoo_created 2",
    "# TYPE _total counter\n_total 1",
    '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\nh_created 1\nh 1',
    '# TYPE s summary\ns{quantile="0.5"} 1\ns_sum 1\ns_count 1\ns_created 1',
    "# TYPE g gaugehistogram\ng_gsum 1\ng_gcount 1\ng_bucket 1",
    "# TYPE i info\ni_info 1\ni 1",
    "# TYPE a untyped\na 1",
    "# TYPE a unknown\na 1",
    "# TYPE a bogus\na 1",
    "# TYPE a counter extra\na 1",
    '# TYPE "" bogus\na 1',
    # HELP and TYPE in odd places
    "# HELP a x\n# HELP a y\na 1",
    "# HELP a x\na 1\n# HELP a y",
    "# HELP a x\na 1\n# TYPE a counter\na 2",
    "a 1\n# TYPE a gauge\na 2",
    "# HELP\na 1",
    "# HELP a x\n# HELP\na 1",
    "# TYPE",
    "# TYPE a",
    "#  HELP a two spaces",
    "#\tTYPE a gauge\na 1",
    "#HELP a glued",
    "# HELP a   spaced   doc",
    '# HELP a \\\\ \\n \\t \\" doc',
    '# HELP "quoted name" doc\n{"quoted name"} 1',
    '# HELP "unterminated doc',
    "# HELP \xa0 doc",
    "# HELP a\\n escaped newline in an unquoted name",
    '# HELP "" x\n{__name__=""} 1',
    "# source: a comment\n# another one\n\n   \n",
    "# TYPE a counter\r\na 1\r\n",
    # sample lines
    "nan",
    "Inf",
    "foo",
    "foo 1 2 3",
    'foo 1 # {a="b"} 2',
    'foo{a="b"} 1 # {trace="x"} 2',
    "foo  1",
    "foo\t1",
    "foo 1\t2",
    "foo\xa0 1",
    " a 1 ",
    "foo 1_0",
    "foo 1 1_0",
    "foo 0x10",
    "foo 1e400",
    "foo -0",
    "foo ١٢",
    "foo 12345678901234567890123",
    "foo 1 " + "9" * 400,
    "foo 1 " + "9" * 5000,
    "foo " + "9" * 400,
    'foo{a="b",} 1',
    "foo{,} 1",
    "foo{,,} 1",
    "foo{a=} 1",
    'foo{a="b", ="c"} 1',
    'foo{ a = "b" } 1',
    'foo {a="b"} 1',
    'foo{a="b"}1',
    'foo{a="b"}\t1',
    'foo{a="b"}  1',
    'foo{a="b" c="d"} 1',
    'foo{a="b"c="d"} 1',
    'foo{a="b"}{c="d"} 1',
    'foo{a="b"',
    'foo{a="b"} ',
    '{a="b"} 1',
    '{"foo"} 1',
    '{"foo",a="b"} 1',
    'foo{"foo"} 1',
    '{__name__="foo"} 1',
    'foo{__name__="foo"} 1',
    'foo{__x="y"} 1',
    'foo{_x="y"} 1',
    'foo{a="b",a="c"} 1',
    'foo{"a b"="c"} 1',
    'foo{a-b="c"} 1',
    'foo{a:b="c"} 1',
    'foo{a\\n="c"} 1',
    'foo bar{a="b"} 1',
    'foo x{a="b"}1',
    'foo 1\nfoo x{a="b"}1',
    '1foo{a="b"} 1',
    'foo{a="}"} 1',
    'foo{a="{"} 1',
    'foo{a="\\"} 1"} 2',
    'foo{a="\\\\"} 1',
    'foo{a="x\\ty"} 1',
    'foo{a="x\\"} 1',
    'foo{a="x"y"} 1',
    'foo{a="日本\u2028"} 1',
    'a{b="\ud800"} 1',
    '{"\ud800"="x"} 1',
    '{"\ud800"} 1',
    '# TYPE "\ud800" gauge\n{"\ud800"} 1',
    'foo{a="b"} 1 2',
    'foo{a="b"} 1 ' + "9" * 400,
    'foo{a="b"} NaN\nfoo{a="c"} +Inf\nfoo{a="d"} -Inf\nfoo{a="e"} -1.5e-300',
]


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_case_agrees_with_prometheus_client(text: str) -> None:
    assert ours(text) == reference(text)


def test_counter_without_total_renames_samples() -> None:
    [family] = parse_exposition("# HELP foo Foo.\n# TYPE foo counter\nfoo 1\n")
    assert (family.name, family.type, family.documentation) == ("foo", "counter", "Foo.")
    assert [s.name for s in family.samples] == ["foo_total"]


def test_untyped_is_unknown_and_escapes_are_undone() -> None:
    [family] = parse_exposition('# HELP a One\\ntwo \\\\ \\"\na{l="x\\ny\\"z\\\\"} NaN 1700000000000')
    assert family.type == "unknown"
    assert family.documentation == 'One\ntwo \\ \\"'
    [sample] = family.samples
    assert sample.labels == {"l": 'x\ny"z\\'}
    assert math.isnan(sample.value)


def test_returned_labels_are_the_callers_own() -> None:
    text = '# TYPE a gauge\na{b="c"} 1\na{b="c"} 2\n'
    first, second = parse_exposition(text)[0].samples
    first.labels["b"] = "changed"
    assert second.labels == {"b": "c"}
    assert parse_exposition(text)[0].samples[0].labels == {"b": "c"}


def test_remembered_series_never_change_results() -> None:
    text = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
    expected = reference(text)
    parser = ExpositionParser()
    assert normalise(parser.parse(text)) == expected  # a first scrape
    assert normalise(parser.parse(text)) == expected  # every later one
    small = ExpositionParser(cache_limit=8)
    for _ in range(3):  # the memory is dropped again and again when full
        assert normalise(small.parse(text)) == expected


def test_each_thread_parses_with_a_parser_of_its_own() -> None:
    text = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
    expected = reference(text)
    barrier = threading.Barrier(4)
    results: list[Normalised] = []

    def scrape() -> None:
        barrier.wait()  # all four parse at once, each with its own memory of the series
        results.extend(normalise(parse_exposition(text)) for _ in range(5))

    threads = [threading.Thread(target=scrape) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 20


# -- errors name the line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('# TYPE a gauge\na 1\na{b="c"} one', 3),
        ('\n\na{b="c" 1', 3),
        ("# HELP a x\n# TYPE a", 2),
        ("a 1\n# TYPE b bogus\nb 1\n", 2),
        ('a{b="c",b="d"} 1', 1),
        ('a{b-c="d"} 1', 1),
        ("a 1\n\n# HELP a-b x", 3),
        ("a 1\nb 1 2 x", 2),
    ],
)
def test_errors_name_the_line(text: str, line: int) -> None:
    assert reference(text) is None
    with pytest.raises(ExpositionError, match=rf"^line {line}: "):
        parse_exposition(text)


def test_keep_skips_without_parsing() -> None:
    text = '# TYPE a gauge\na{x="y"} not-a-number\n# TYPE vllm:b gauge\nvllm:b 2\n'
    [family] = parse_exposition(text, keep=lambda name: name.startswith("vllm:"))
    assert family.name == "vllm:b"
    with pytest.raises(ExpositionError, match=r"^line 2: "):
        parse_exposition(text)


def test_keep_reads_names_like_prometheus_client() -> None:
    # The second line's name is `foo x`, although `foo ` starts it like the first one.
    text = '# TYPE foo gauge\nfoo 1\nfoo x{a="b"}1\n'
    full = parse_exposition(text)
    assert [f.name for f in full] == ["foo", "foo x"]
    parse_exposition(text)  # now `foo` is a remembered series
    assert parse_exposition(text, keep=lambda name: name == "foo x") == full[1:]


def test_keep_sees_final_family_name_after_retype() -> None:
    text = "# HELP c_total c\nc_total 1\n# TYPE c_total counter\nc_total 2\nx 3\n"
    full = parse_exposition(text)
    assert [f.name for f in full] == ["c", "x"]
    assert parse_exposition(text, keep=lambda name: name == "c") == full[:1]
    assert parse_exposition(text, keep=lambda name: name == "c_total") == []
