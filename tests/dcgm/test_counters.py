"""The counters file: the default set loads; every kind of bad line fails naming the line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servescope.core.catalog.spec import Kind
from servescope.core.dcgm.counters import CountersError, load_counters, parse_counters

GOOD = "409, servescope_dcgm_x_errors_total, counter, count, -, X errors.\n"


def test_default_set_covers_what_the_operators_watch() -> None:
    fields = {f.field_id: f for f in load_counters()}
    for fid in (
        409,
        419,
        429,
        439,
        497,
        498,
        499,
        1009,
        1010,
        1011,
        1012,
        1001,
        1002,
        1003,
        1004,
        1005,
        230,
        310,
        311,
        312,
        313,
        393,
        394,
        395,
        396,
        240,
        241,
        202,
    ):
        assert fid in fields, fid
    assert fields[1009].spec.kind is Kind.GAUGE and "PCIe, not NVLink" in fields[1009].spec.help
    assert fields[409].spec.name.endswith("_total") and fields[409].spec.kind is Kind.COUNTER
    assert fields[230].spec.kind is Kind.GAUGE  # last XID is a code, never a count
    assert fields[240].scale == 1e-9 and fields[240].spec.name.endswith("_seconds_total")
    assert {f.fallback_for for f in fields.values() if f.fallback_for} == {409, 419, 439}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc, m_total, counter, count, -, h\n", "line 1: field id 'abc' is not a number"),
        (
            "409, servescope_x, counter, count, -, h\n",
            "line 1: metric 'servescope_x': counters, and only counters",
        ),
        ("409, servescope_x_total, gauge, count, -, h\n", "line 1: metric 'servescope_x_total': counters"),
        ("409, servescope_x_total, counter, furlongs, -, h\n", "line 1: unknown unit 'furlongs'"),
        ("409, servescope_x_total, rate, count, -, h\n", "line 1: type 'rate' must be counter or gauge"),
        ("409, servescope_x_total, counter, count\n", "line 1: expected 6 comma-separated columns"),
        (GOOD + GOOD, "line 2: field 409 is listed twice"),
        (
            "# c\n\n409, servescope_x_total, counter, count, colour=red, h\n",
            "line 3: bad option 'colour=red'",
        ),
        ("1206, servescope_x_total, counter, count, fallback_for=409, h\n", "line 1: fallback_for=409 names"),
        ("409, Servescope_X_total, counter, count, -, h\n", "line 1: metric 'Servescope_X_total'"),
        ("409, servescope_x_total, counter, count, -,\n", "line 1: help text is empty"),
        ("# only comments\n", "no fields"),
    ],
)
def test_bad_lines_fail_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(CountersError, match=re.escape(message)):
        parse_counters(text, "counters.csv")


def test_per_link_rows_carry_a_link_label(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text(
        "400, servescope_dcgm_link_flit_errors_total, counter, count, link=0, L0 flits.\n"
        "401, servescope_dcgm_link_flit_errors_total, counter, count, link=1, L1 flits.\n"
    )
    fields = load_counters(path)
    assert [f.link for f in fields] == ["0", "1"]
    assert fields[0].spec.labels == ("gpu", "uuid", "hostname", "link")


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CountersError, match=r"cannot read counters file .*missing\.csv"):
        load_counters(tmp_path / "missing.csv")
