"""Every spelling of every signal lands on the same normalised name, with the values in the file."""

from __future__ import annotations

import pytest

from servescope.core.exposition import parse_exposition
from servescope.core.vllm.aliases import is_engine_family, split_name
from servescope.exporter.vllm.normalise import normalise
from tests.helpers import SAMPLES


def signals(text: str) -> tuple[str, str, dict]:  # type: ignore[type-arg]
    result = normalise(parse_exposition(text, keep=is_engine_family))
    (engine,) = result.engines.values()
    return (
        result.backend,
        result.generation,
        {
            **engine.values,
            "finished": engine.finished,
            **{f"{name}_count": h.count for name, h in engine.histograms.items()},
            "model_name": engine.model_name,
            "engine": engine.engine,
        },
    )


def test_vllm_032_real_server() -> None:
    backend, generation, s = signals((SAMPLES / "vllm-0.32-cpu-idle.txt").read_text())
    assert (backend, generation) == ("vllm", "0.11+")
    assert (s["model_name"], s["engine"]) == ("tiny-llm", "0")
    assert s["running"] == 0 and s["waiting"] == 0 and s["kv_usage"] == 0
    assert s["prompt_tokens"] == 712 and s["generation_tokens"] == 1794
    assert s["ttft_count"] == 30 and s["e2e_count"] == 29 and s["itl_count"] == 1764
    assert s["iteration_tokens_count"] == 638
    assert s["finished"] == {"stop": 1, "length": 28, "abort": 0, "error": 0, "repetition": 0}
    assert s["kv_capacity_tokens"] == 524288 and s["gpu_memory_utilization"] == 0.92
    assert s["prefix_cache_queries"] == 712 and s["preemptions"] == 0


def test_vllm_010_transition_release_prefers_new_names_and_maps_old_itl() -> None:
    backend, generation, s = signals((SAMPLES / "vllm-0.10-full.txt").read_text())
    assert (backend, generation) == ("vllm", "0.9-0.10")
    assert s["kv_usage"] == pytest.approx(0.0011764705882353343)
    assert s["prefix_cache_hits"] == 80 and s["prefix_cache_queries"] == 246
    assert s["itl_count"] == 1733  # from time_per_output_token_seconds: no inter_token_latency yet
    assert s["kv_capacity_tokens"] == 16 * 850
    assert s["finished"]["stop"] == 6


def test_sglang_maps_to_the_same_signals() -> None:
    backend, generation, s = signals((SAMPLES / "sglang-0.4-docs.txt").read_text())
    assert (backend, generation) == ("sglang", "0.4+")
    assert s["running"] == 162 and s["waiting"] == 2826 and s["kv_usage"] == 0.28
    assert s["ttft_count"] == 11008 and s["e2e_count"] == 11228 and s["itl_count"] == 7400757
    assert s["prompt_tokens"] == 8128902 and s["kv_capacity_tokens"] == round(123859 / 0.28)


@pytest.mark.parametrize("prefix", ["vllm_", "kserve_vllm:", ""])
def test_rewritten_prefixes_give_identical_signals(prefix: str) -> None:
    text = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
    _, generation, expected = signals(text)
    backend, got_generation, got = signals(text.replace("vllm:", prefix))
    assert backend == "vllm" and got_generation == generation and got == expected


def test_only_old_names_is_an_old_generation_and_still_maps() -> None:
    text = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
    old = (
        text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        .replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
        .replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
    )
    _, generation, s = signals(old)
    assert generation == "pre-0.9"
    assert s["kv_usage"] == 0 and s["itl_count"] == 1764 and s["prefix_cache_queries"] == 712


def test_counters_without_type_lines_still_map() -> None:
    text = (
        'vllm:num_preemptions_total{engine="0",model_name="m"} 7\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
    )
    _, _, s = signals(text)
    assert s["preemptions"] == 7 and s["running"] == 3


def test_split_name() -> None:
    assert split_name("kserve_vllm:num_requests_running") == ("vllm", "num_requests_running")
    assert split_name("num_requests_running") == ("vllm", "num_requests_running")
    assert split_name("sglang:token_usage") == ("sglang", "token_usage")
    assert split_name("python_gc_objects_collected") is None
    assert split_name("http_requests_total") is None
