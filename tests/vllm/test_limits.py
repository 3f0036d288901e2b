"""What one engine's page may make the exporter hold: limits applied while parsing, each refusal counted
per endpoint and reason, passthrough off unless asked and then only for the families allowed."""

from __future__ import annotations

from pathlib import Path

from servescope.core import catalog as c
from servescope.core.catalog import bounds
from servescope.core.exposition import ExpositionParser, SeriesLimits, parse_exposition
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
URL = "http://10.0.0.1:8000/metrics"
LIMITS = SeriesLimits(max_series=100, max_label_value_length=40, max_label_values=10)


def gauge_page(count: int, *, model: str = "m", per_model: bool = False, start: int = 0) -> str:
    """`count` samples of vllm:num_requests_running, each a new engine (or a new model)."""
    lines = ["# TYPE vllm:num_requests_running gauge"]
    for i in range(start, start + count):
        labels = f'model_name="{model}{i}",engine="0"' if per_model else f'model_name="{model}",engine="{i}"'
        lines.append(f"vllm:num_requests_running{{{labels}}} {i}")
    return "\n".join(lines) + "\n"


def test_the_series_limit_keeps_the_first_samples_and_counts_the_rest() -> None:
    parser = ExpositionParser(limits=SeriesLimits(max_series=100, max_label_values=1000))
    [family] = parser.parse(gauge_page(150))
    assert [s.labels["engine"] for s in family.samples] == [str(i) for i in range(100)]
    assert parser.dropped == {"series_limit": 50}


def test_a_long_label_value_drops_its_series_on_the_fast_and_the_slow_path() -> None:
    long = "x" * 41
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="ok",engine="0"} 1\n'
        f'vllm:num_requests_running{{model_name="{long}",engine="0"}} 2\n'
        f'vllm:num_requests_running{{model_name="{long}\\n",engine="1"}} 3\n'  # an escape: the slow path
    )
    parser = ExpositionParser(limits=LIMITS)
    [family] = parser.parse(text)
    assert [s.value for s in family.samples] == [1]
    assert parser.dropped == {"label_value_length": 2}
    assert parse_exposition(text)[0].samples[1].value == 2  # without limits, all of them


def test_a_label_past_its_distinct_values_drops_the_later_samples() -> None:
    parser = ExpositionParser(limits=LIMITS)
    [family] = parser.parse(gauge_page(25, per_model=True))
    assert [s.labels["model_name"] for s in family.samples] == [f"m{i}" for i in range(10)]
    assert parser.dropped == {"label_values_limit": 15}


def test_a_family_under_the_limits_is_untouched_and_real_pages_pass_whole() -> None:
    limited = ExpositionParser(limits=SeriesLimits()).parse(GOOD)
    assert limited == parse_exposition(GOOD)


def test_fresh_series_every_page_never_grow_what_the_parser_remembers() -> None:
    parser = ExpositionParser(limits=SeriesLimits(max_series=200, max_label_values=1000))
    sizes = []
    for page in range(6):
        parser.parse(gauge_page(150, start=page * 150))
        memory = parser._memory
        sizes.append(max(len(memory.heads), len(memory.label_sets), len(memory.pairs)))
    assert max(sizes) <= 200
    assert sizes[-1] == 0  # two pages in a row of new series: forgotten, nothing kept for the next


class Pages:
    def __init__(self, text: str) -> None:
        self.text = text

    def fetch(self, url: str) -> str:
        return self.text

    def close(self) -> None:
        pass


def source(tmp_path: Path, text: str, **options: object) -> VllmSource:
    return VllmSource(
        [URL],
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=Pages(text),  # type: ignore[arg-type]
        limits=LIMITS,
        **options,  # type: ignore[arg-type]
    )


def test_the_source_counts_drops_per_endpoint_and_reason_and_exports_within_the_limits(
    tmp_path: Path,
) -> None:
    one = source(tmp_path, gauge_page(150))
    try:
        first, second = one.collect(), one.collect()
    finally:
        one.close()
    dropped = bounds.SERIES_DROPPED.name
    assert values(first.samples, dropped, endpoint=URL, reason="label_values_limit") == [90]
    assert values(second.samples, dropped, endpoint=URL, reason="label_values_limit") == [180]  # a counter
    engines = {s.label_values[1] for s in second.samples if s.spec is c.RUNNING}
    assert len(engines) == 10  # what is exported follows what was kept
    assert second.raw is None  # passthrough is off unless asked


def test_passthrough_re_exports_only_the_allowed_families(tmp_path: Path) -> None:
    default = source(tmp_path, GOOD, passthrough=True)
    listed = source(tmp_path, GOOD, passthrough=True, passthrough_families=["vllm:request_success*"])
    try:
        read, chosen = default.collect().raw or "", listed.collect().raw or ""
    finally:
        default.close()
        listed.close()
    assert "vllm:kv_cache_usage_perc{" in read and "vllm:request_success_total{" in read
    assert "vllm:num_preemptions" in read and "vllm:request_params_n" not in read  # read: only known ones
    assert "vllm:request_success_total{" in chosen and "vllm:kv_cache_usage_perc{" not in chosen
