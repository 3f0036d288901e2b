"""Read actions against a real `servescope serve --simulate`: snapshots, processes, memory, NVLink,
serving and advice; an unreachable exporter is a failed result."""

from __future__ import annotations

from typing import Any

import pytest

from servescope.runbooks.actions import (
    RunContext,
)
from tests.runbook.fakes import (
    run,
    start_simulated_exporter,
)
from tests.support import Served, stop


@pytest.fixture(scope="module")
def ctx(simulated_exporter: Served) -> RunContext:
    return RunContext(exporter_url=simulated_exporter.base)


@pytest.fixture(scope="module")
def gpu0(ctx: RunContext) -> dict[str, Any]:
    result = run("gpu_snapshot", ctx, gpu="0")
    assert result.ok, result.output
    return result.data


# --- read actions against `servescope serve --simulate --gpus 4 --engines 2` ------------------------
@pytest.mark.e2e
def test_gpu_snapshot_by_index_and_by_uuid(ctx: RunContext, gpu0: dict[str, Any]) -> None:
    assert gpu0["gpu"] == "0" and gpu0["uuid"].startswith("GPU-") and gpu0["up"] == 1
    assert 0 <= gpu0["utilization_ratio"] <= 1
    assert gpu0["memory_used_bytes"] > 0 and gpu0["memory_total_bytes"] > gpu0["memory_used_bytes"]
    assert gpu0["temperature_celsius"] > 0 and gpu0["power_limit_watts"] > 0
    assert set(gpu0["clocks_hertz"]) == {"sm", "memory"}
    assert gpu0["memory_summary"]["gpu"] == "0"
    by_uuid = run("gpu_snapshot", ctx, gpu="GPU-" + gpu0["uuid"][4:].upper())
    assert by_uuid.ok and by_uuid.data["gpu"] == "0"
    assert "GPU 0 (" in by_uuid.output and "UP" in by_uuid.output and "utilisation" in by_uuid.output
    assert by_uuid.action == "gpu_snapshot" and by_uuid.kind == "read"


@pytest.mark.e2e
def test_an_unknown_gpu_is_a_failed_result_naming_the_known_ones(ctx: RunContext) -> None:
    result = run("gpu_snapshot", ctx, gpu="7")
    assert not result.ok
    assert "GPU '7' is not in the exporter's metrics (known GPUs: 0 (GPU-" in result.output


@pytest.mark.e2e
def test_process_list_joins_processes_to_engines(ctx: RunContext) -> None:
    result = run("process_list", ctx, gpu="0")
    assert result.ok, result.output
    processes = result.data["processes"]
    assert processes and all(p["memory_used_bytes"] > 0 for p in processes)
    assert any(p["model_name"] == "deepseek-ai/DeepSeek-V3" and p["endpoint"] for p in processes)
    assert "pid" in result.output and "deepseek-ai/DeepSeek-V3" in result.output


@pytest.mark.e2e
def test_memory_curve_returns_the_summary_and_the_svg(ctx: RunContext) -> None:
    result = run("memory_curve", ctx, gpu="1", window="2m")
    assert result.ok, result.output
    assert result.svg is not None and result.svg.startswith("<svg") and result.svg.rstrip().endswith("</svg>")
    assert result.data["gpu"] == "1" and result.data["samples"] > 0 and result.data["window_seconds"] == 120
    assert "leak" in result.data and "memory over the last 2m" in result.output
    too_long = run("memory_curve", ctx, gpu="1", window="2d")  # beyond the exporter's 1 h retention
    assert not too_long.ok and "must be between 10s and the retention" in too_long.output


@pytest.mark.e2e
def test_nvlink_errors_per_gpu_by_default_and_the_dcgm_counters(ctx: RunContext) -> None:
    result = run("nvlink_errors", ctx, gpu="2")
    assert result.ok, result.output
    assert result.data["links_total"] == 18 and result.data["links_up"] == 18
    # The exposition sums over links by default: the links come from the exporter's NVLink API.
    links = result.data["links"]
    assert sorted(links, key=int) == [str(n) for n in range(18)]
    assert all(set(v) >= {"up", "crc_flit", "crc_data", "replay", "recovery"} for v in links.values())
    for kind, total in result.data["totals"].items():  # /metrics was read first: the API counts no less
        assert total is not None and sum(v[kind] for v in links.values()) >= total, kind
    assert "--nvlink-per-link" not in result.output
    assert set(result.data["dcgm"]) == {"409", "419", "429", "439"}
    assert "1009/1010 are PCIe bytes/s" in result.output


@pytest.mark.e2e
def test_nvlink_errors_per_link_where_the_exporter_exports_them() -> None:
    served = start_simulated_exporter("--nvlink-per-link")
    try:
        result = run("nvlink_errors", RunContext(exporter_url=served.base), gpu="2")
    finally:
        stop(served)
    assert result.ok, result.output
    assert len(result.data["links"]) == 18
    assert all(
        set(v) >= {"up", "crc_flit", "crc_data", "replay", "recovery"} for v in result.data["links"].values()
    )
    for kind, total in result.data["totals"].items():  # the per-GPU sums add up the per-link counters
        assert total == sum(v[kind] for v in result.data["links"].values()), kind
    assert "--nvlink-per-link" not in result.output


@pytest.mark.e2e
def test_serving_snapshot_of_every_engine_or_the_one_asked_for(ctx: RunContext) -> None:
    everything = run("serving_snapshot", ctx)
    assert everything.ok, everything.output
    engines = everything.data["engines"]
    assert len(engines) == 2
    for engine in engines:
        assert engine["kv_cache_usage_ratio"] is not None and engine["requests_running"] is not None
        assert engine["recommended_max_num_seqs"] >= 1 and engine["recommended_reason"]
        assert engine["gpus"]
    endpoint = engines[1]["endpoint"]
    one = run("serving_snapshot", ctx, endpoint=endpoint)
    assert [e["endpoint"] for e in one.data["engines"]] == [endpoint]
    by_model = run("serving_snapshot", ctx, model_name="deepseek-ai/DeepSeek-V3")
    assert len(by_model.data["engines"]) == 2
    unknown = run("serving_snapshot", ctx, model_name="no/such-model")
    assert not unknown.ok and "no serving engine with model_name 'no/such-model'" in unknown.output


@pytest.mark.e2e
def test_batch_size_advice_gives_the_value_its_inputs_and_the_rule(ctx: RunContext) -> None:
    result = run("batch_size_advice", ctx, model_name="deepseek-ai/DeepSeek-V3")
    assert result.ok, result.output
    for advice in result.data["engines"]:
        assert advice["reason"] in {"latency_over_slo", "gpu_underutilised", "within_slo", "no_traffic"}
        assert advice["recommended_max_num_seqs"] >= 1
        assert advice["rule"] and advice["gpu_utilization_ratio"] is not None
        assert set(advice["p99_since_start_seconds"]) == {"ttft", "e2e"}
    assert "recommended max_num_seqs" in result.output and "x0.8" in result.output


@pytest.mark.e2e
def test_capacity_advice_against_the_20_percent_buffer(ctx: RunContext) -> None:
    result = run("capacity_advice", ctx)
    assert result.ok, result.output
    data = result.data
    assert data["gpu_count"] == 4 and data["buffer_ratio"] == 0.2
    assert data["spare_ratio"] == pytest.approx(1 - data["mean_utilization_ratio"])
    assert data["below_buffer"] == (data["spare_ratio"] < 0.2)
    assert data["additional_gpus_needed"] >= 0


def test_an_unreachable_exporter_is_a_failed_result_not_a_crash() -> None:
    result = run("gpu_snapshot", RunContext(exporter_url="http://127.0.0.1:1", timeout_seconds=2), gpu="0")
    assert not result.ok and "cannot reach the exporter at http://127.0.0.1:1" in result.output
