"""The renderer's output is what prometheus_client's own parser reads back, value for value."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from servescope.core import catalog as c
from servescope.core.catalog import spec as spec_module
from servescope.exporter.exposition import Sample, SeriesRenderer, family_header, format_value


def render(samples: list[Sample]) -> str:
    families = SeriesRenderer().render(samples)
    return "".join(family_header(c.BY_NAME[name]) + "".join(lines) for name, lines in families.items())


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (1.0, "1"),
        (150754820096, "150754820096"),
        (0.25, "0.25"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (float("nan"), "NaN"),
        (1e20, "1e+20"),
        (-3.5, "-3.5"),
    ],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


@given(
    st.lists(
        st.tuples(st.text(max_size=30), st.floats(allow_nan=False)),
        min_size=1,
        max_size=20,
        unique_by=lambda item: item[0],
    )
)
def test_any_label_value_and_float_round_trip_through_the_reference_parser(
    items: list[tuple[str, float]],
) -> None:
    samples = [Sample(c.GPU_FIELD_SUPPORTED, ("0", "GPU-x", "h", field), value) for field, value in items]
    (family,) = text_string_to_metric_families(render(samples))
    parsed = {s.labels["field"]: s.value for s in family.samples}
    assert parsed.keys() == {field for field, _ in items}
    for field, value in items:
        assert parsed[field] == value or (math.isinf(value) and parsed[field] == value)


def test_wrong_label_count_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="servescope_gpu_up: 2 label values"):
        SeriesRenderer().render([Sample(c.GPU_UP, ("0", "x"), 1)])


def test_prefix_cache_is_bounded() -> None:
    renderer = SeriesRenderer(limit=10)
    for pid in range(100):
        renderer.render([Sample(c.PROCESS_MEMORY, ("0", "u", "h", str(pid), "", "", ""), 1)])
    assert len(renderer._prefixes) <= 10


def test_the_workload_s_labels_are_rendered_only_when_known() -> None:
    renderer = SeriesRenderer()
    unknown = renderer.render([Sample(c.PROCESS_MEMORY, ("0", "u", "h", "7", "", "", ""), 1)])
    assert unknown[c.PROCESS_MEMORY.name] == [
        'servescope_gpu_process_memory_used_bytes{gpu="0",uuid="u",hostname="h",pid="7"} 1\n'
    ]
    known = renderer.render([Sample(c.PROCESS_MEMORY, ("0", "u", "h", "7", "llm", "ds-0", "vllm"), 1)])
    assert known[c.PROCESS_MEMORY.name] == [
        'servescope_gpu_process_memory_used_bytes{gpu="0",uuid="u",hostname="h",pid="7",namespace="llm",'
        'pod="ds-0",container="vllm"} 1\n'
    ]
    # Other labels keep their empty values, as before (source_up's endpoint="").
    other = renderer.render([Sample(c.SOURCE_UP_ENDPOINT, ("vllm", ""), 1)])
    assert other[c.SOURCE_UP_ENDPOINT.name] == ['servescope_source_up{source="vllm",endpoint=""} 1\n']


def test_catalog_follows_naming_conventions() -> None:
    for spec in c.CATALOG:
        assert spec.help.endswith((".", ")")), spec.name
        if spec.source in ("nvml", "dcgm") and "gpu" in spec.labels:
            assert spec.labels[:3] == spec_module.GPU_LABELS, spec.name
        assert "model_name" not in spec.labels or spec.source != "nvml", spec.name
    with pytest.raises(ValueError, match="counters, and only counters"):
        spec_module.MetricSpec("servescope_x_errors", spec_module.Kind.COUNTER, "x", (), "core")
