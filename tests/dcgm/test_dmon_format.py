"""The dmon parser on captured outputs and on every layout the renderer can draw."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servescope.core.dcgm.dmon_format import (
    LAYOUTS,
    CellStatus,
    Column,
    DmonParser,
    ErrorKind,
    ErrorLine,
    Header,
    Row,
    Unparseable,
    fit,
    parse_dmon,
    render_header,
    render_row,
)
from tests.helpers import SAMPLES


def rows(text: str) -> list[Row]:
    return [e for e in parse_dmon(text.splitlines()) if isinstance(e, Row)]


def test_dcgm_42_profiling_sample_values() -> None:
    events = list(parse_dmon((SAMPLES / "dcgmi-dmon-4.2-profiling.txt").read_text().splitlines()))
    header = next(e for e in events if isinstance(e, Header))
    assert header.columns == ("GRACT", "SMACT", "SMOCC", "TENSO", "DRAMA", "FP64A", "FP32A", "FP16A")
    got = [e for e in events if isinstance(e, Row)]
    assert len(got) == 10
    assert all(c.status is CellStatus.NA for row in got[:8] for c in row.cells)  # first iteration: all N/A
    gpu0, gpu1 = got[8], got[9]
    assert (gpu0.entity, gpu0.entity_id) == ("GPU", "0")
    assert [c.value for c in gpu0.cells] == [0.888, None, None, 0.178, None, None, None, 0.001]
    assert [c.value for c in gpu1.cells] == [None, 0.777, None, None, None, 0.0, 0.046, None]
    assert not [e for e in events if isinstance(e, Unparseable | ErrorLine)]


def test_dcgm_31_watch_error_sample() -> None:
    events = list(parse_dmon((SAMPLES / "dcgmi-dmon-3.1-watch-error.txt").read_text().splitlines()))
    assert [type(e) for e in events] == [Header, ErrorLine]
    assert events[0].columns == ("NVL0T",)
    assert isinstance(events[1], ErrorLine) and events[1].kind is ErrorKind.WATCH_NOT_SUPPORTED


@pytest.mark.parametrize(
    ("line", "kind", "field_id"),
    [
        (
            "Error: unable to establish a connection to the specified host: localhost",
            ErrorKind.HOST_ENGINE_UNREACHABLE,
            None,
        ),
        (
            "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
            ErrorKind.HOST_ENGINE_UNREACHABLE,
            None,
        ),
        ("Error: Expected numerical fieldId. Got 'abc' instead.", ErrorKind.INVALID_FIELD, None),
        (
            "Error: Got invalid field ID. '1206'. See dcgm_fields.h for a list of valid field IDs.",
            ErrorKind.INVALID_FIELD,
            1206,
        ),
        (
            "Error setting watches. Result: -33: This request is serviced by a module of DCGM that is not "
            "currently loaded",
            ErrorKind.MODULE_NOT_LOADED,
            None,
        ),
        ("Error setting watches. Result: -6: Feature not supported", ErrorKind.WATCH_NOT_SUPPORTED, None),
        ("Error getting values information. Return -2: Bad parameter", ErrorKind.VALUES_ERROR, None),
        ("No data returned from the hostengine.", ErrorKind.NO_DATA, None),
    ],
)
def test_error_lines_are_classified(line: str, kind: ErrorKind, field_id: int | None) -> None:
    parser = DmonParser()
    event = parser.feed(line)
    assert isinstance(event, ErrorLine) and event.kind is kind and event.field_id == field_id


def test_entity_kinds_repeated_headers_unknown_columns_and_trailing_spaces() -> None:
    text = "\n".join(
        [
            "#Entity         NEWFLD       GRACT        ",
            "ID                                        ",
            "GPU 0           7            0.5          ",
            "GPU-I 1         N/A          0.25         ",
            "GPU-CI 2        1            N/A          ",
            "Switch 13       3            4            ",
            "CPU 0           5            6            ",
            "CPU Core 5      5            6            ",
            "GPU 0 LINK 3    12...        0.1          ",
            "Error getting values information. Return -1: oops",
            "#Entity         NEWFLD       GRACT        ",
            "ID                                        ",
            "GPU 1           8            0.75         ",
        ]
    )
    events = list(parse_dmon(text.splitlines()))
    got = [(r.entity, r.entity_id, r.link, [c.value for c in r.cells]) for r in events if isinstance(r, Row)]
    assert got == [
        ("GPU", "0", None, [7.0, 0.5]),
        ("GPU-I", "1", None, [None, 0.25]),
        ("GPU-CI", "2", None, [1.0, None]),
        ("Switch", "13", None, [3.0, 4.0]),
        ("CPU", "0", None, [5.0, 6.0]),
        ("CPU Core", "5", None, [5.0, 6.0]),
        ("GPU", "0", "3", [None, 0.1]),
        ("GPU", "1", None, [8.0, 0.75]),
    ]
    truncated = next(r for r in events if isinstance(r, Row) and r.link == "3").cells[0]
    assert truncated.status is CellStatus.TRUNCATED and truncated.value is None
    assert sum(isinstance(e, Header) for e in events) == 2
    assert [e.kind for e in events if isinstance(e, ErrorLine)] == [ErrorKind.VALUES_ERROR]


def test_rows_that_do_not_fit_the_header_are_reported_with_their_line() -> None:
    events = list(parse_dmon(["GPU 0  1", "#Entity  A  B", "ID", "GPU 0  1", "banana"]))
    problems = [(e.line_no, e.reason) for e in events if isinstance(e, Unparseable)]
    assert problems == [
        (1, "row before any #Entity header"),
        (4, "expected 2 values, got 1"),
        (5, "not dcgmi dmon output"),
    ]


_values = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),
    st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda v: f"{v:.3f}"),
    st.just("N/A"),
)
_entities = st.one_of(
    st.integers(0, 15).map(lambda i: f"GPU {i}"),
    st.integers(0, 15).map(lambda i: f"GPU-I {i}"),
    st.integers(0, 15).map(lambda i: f"GPU-CI {i}"),
    st.integers(0, 63).map(lambda i: f"Switch {i}"),
    st.integers(0, 3).map(lambda i: f"CPU {i}"),
    st.tuples(st.integers(0, 7), st.integers(0, 17)).map(lambda p: f"GPU {p[0]} LINK {p[1]}"),
)


@settings(max_examples=150, deadline=None)
@given(
    layout=st.sampled_from(sorted(LAYOUTS)),
    widths=st.lists(st.integers(3, 20), min_size=1, max_size=8),
    data=st.data(),
)
def test_rendered_tables_parse_back_to_the_same_values(
    layout: str, widths: list[int], data: st.DataObject
) -> None:
    columns = [Column(f"F{i}X", w) for i, w in enumerate(widths)]
    table = data.draw(
        st.lists(
            st.tuples(_entities, st.lists(_values, min_size=len(columns), max_size=len(columns))), max_size=12
        )
    )
    lay = LAYOUTS[layout]
    lines = [*render_header(lay, columns)]
    for i, (entity, values) in enumerate(table):
        if i and i % 5 == 0:  # a repeated header in the middle
            lines += ([""] if lay.blank_before_repeat else []) + render_header(lay, columns)
        lines.append(render_row(lay, entity, columns, values) + "  ")
    parsed = rows("\n".join(lines))
    assert len(parsed) == len(table)
    for row, (entity, values) in zip(parsed, table, strict=True):
        name = f"{row.entity} {row.entity_id}" + (f" LINK {row.link}" if row.link else "")
        assert name == entity
        for cell, value, column in zip(row.cells, values, columns, strict=True):
            shown = fit(value, column.width)
            if value == "N/A":
                assert cell.status is CellStatus.NA
            elif shown != value:
                assert cell.status is CellStatus.TRUNCATED and cell.value is None  # never a wrong number
            else:
                assert cell.status is CellStatus.OK and cell.value == float(value)
