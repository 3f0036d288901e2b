"""SVG memory chart: valid standalone XML with curve, trend and capacity, untrusted title escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from servescope.exporter.derived.svg import render_memory_svg

GIB = 1024**3
NS = "{http://www.w3.org/2000/svg}"


def _series() -> tuple[list[float], list[float]]:
    times = [1000.0 + t for t in range(600)]
    return times, [100 * GIB + t * 1e6 for t in range(600)]


def test_svg_is_valid_xml_with_curve_trend_and_capacity() -> None:
    times, values = _series()
    svg = render_memory_svg(times, values, 141 * GIB, slope=1e6, title="gpu 0")
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    classes = {el.get("class") for el in root.iter()}
    assert {"memory", "trend", "capacity"} <= classes
    trend = next(el for el in root.iter(f"{NS}line") if el.get("class") == "trend")
    assert trend.get("stroke-dasharray")
    texts = [el.text or "" for el in root.iter(f"{NS}text")]
    assert any("capacity 141.0 GiB" in t for t in texts)
    assert any(t.endswith("GiB") for t in texts)
    assert "now" in texts
    assert "href" not in svg
    assert "script" not in svg


def test_axis_starts_near_the_curve_so_slow_growth_is_visible() -> None:
    times, values = _series()  # 100 GiB + 0.6 GB over 10 min, on a 141 GiB card
    root = ET.fromstring(render_memory_svg(times, values, 141 * GIB, note="trend +57 MiB/min"))
    labels = [el.text or "" for el in root.iter(f"{NS}text") if (el.text or "").endswith(" GiB")]
    assert labels[0] != "0.0 GiB"
    assert 85 < float(labels[0].split()[0]) < 100
    assert any(el.text == "trend +57 MiB/min" for el in root.iter(f"{NS}text") if el.get("class") == "note")


def test_svg_escapes_evil_title() -> None:
    times, values = _series()
    evil = '</svg><script>alert("x")</script>&'
    svg = render_memory_svg(times, values, 141 * GIB, title=evil)
    assert "<script" not in svg
    root = ET.fromstring(svg)
    assert not list(root.iter(f"{NS}script"))
    assert any(el.text == evil for el in root.iter(f"{NS}text"))


def test_svg_without_data_or_trend_still_valid() -> None:
    empty = ET.fromstring(render_memory_svg([], [], 80 * GIB))
    assert any(el.text == "no data" for el in empty.iter(f"{NS}text"))
    times, values = _series()
    plain = ET.fromstring(render_memory_svg(times, values, 141 * GIB))
    assert "trend" not in {el.get("class") for el in plain.iter()}
