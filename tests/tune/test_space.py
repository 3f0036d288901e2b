"""The declared search space: values, conditions, objectives, and errors that name their input."""

from __future__ import annotations

from pathlib import Path

import pytest

from servescope.kit.tune.space import load_space, parse_space

SMALL = Path(__file__).with_name("space-small.yaml")


def test_the_grid_enumerates_every_combination_in_declared_order() -> None:
    space = load_space(SMALL)
    grid = list(space.grid())
    assert space.size() == len(grid) == 64
    assert grid[0] == {
        "max_num_seqs": 32,
        "quantization": None,
        "kv_cache_dtype": "auto",
        "scheduling_policy": "fcfs",
        "gpu_memory_utilization": 0.9,
    }
    assert grid[-1]["max_num_seqs"] == 256 and grid[-1]["gpu_memory_utilization"] == 0.98
    assert space.engine == {"num_gpu_blocks": 8192} and space.plan.duration_s == 15


def test_a_conditional_parameter_exists_only_where_its_condition_holds() -> None:
    space = parse_space(
        {
            "parameters": {
                "enable_chunked_prefill": [False, True],
                "max_num_batched_tokens": {"values": [512, 2048], "when": {"enable_chunked_prefill": True}},
            }
        }
    )
    assert list(space.grid()) == [
        {"enable_chunked_prefill": False},
        {"enable_chunked_prefill": True, "max_num_batched_tokens": 512},
        {"enable_chunked_prefill": True, "max_num_batched_tokens": 2048},
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "non-empty `parameters`"),
        ({"parameters": {"Max-Seqs": [1]}}, "'Max-Seqs'"),
        ({"parameters": {"max_num_seqs": []}}, "non-empty list"),
        ({"parameters": {"a": {"values": [1], "when": {"b": 1}}, "b": [1]}}, "earlier parameters"),
        ({"parameters": {"a": [1]}, "objective": "latency"}, "objective must be"),
        ({"parameters": {"a": [1]}, "capacity": {"slo": ["ttfb:1"]}}, "metric must be one of"),
    ],
)
def test_bad_spaces_are_refused_with_the_reason(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_space(data)


def test_a_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("parameters: [unclosed\n")
    with pytest.raises(ValueError, match=r"space\.yaml"):
        load_space(path)
