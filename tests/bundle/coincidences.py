"""Numbers in runbook pages and dashboards that equal a config default and are not that setting.

A page (or dashboard) on a line of its own, then one indented line per config field whose default it
equals by coincidence: the field, how many times, and what the number is instead. `test_config_literals`
fails when a listed number disappears (the line goes) or a new one appears (a copy of a threshold, to
write as `{{ config.x }}`).
"""

from __future__ import annotations

_TABLE = """
ServescopeE2eSloBurnFast.md
    gpu_saturated_sm_active_ratio  1  the batch controller's x0.8 step on max_num_seqs
    request_error_ratio            1  the burn table's budget spent, 5% per 6 hours
    memory_headroom_ratio          1  the burn table's budget spent, 5% per 6 hours
ServescopeTtftSloBurnFast.md
    gpu_saturated_sm_active_ratio  1  the batch controller's x0.8 step on max_num_seqs
    request_error_ratio            1  the burn table's budget spent, 5% per 6 hours
    memory_headroom_ratio          1  the burn table's budget spent, 5% per 6 hours
ServescopeEngineOverMemoryBudget.md
    kv_anomaly_min_stddev          1  a step of gpu_memory_utilization (by 0.02)
ServescopeGpuMemoryExhaustionSoon.md
    capacity_buffer_ratio          1  the load change (20 %) that makes growth a ramp, a rule constant
ServescopeGpuMemoryHeadroomLow.md
    gpu_saturated_sm_active_ratio  1  gpu_memory_utilization 0.8 of the operators' setup
    slo_e2e_latency_le             1  the exporter's peak window, 60 s
    source_stale_min_seconds       1  the exporter's peak window, 60 s
    request_error_ratio            2  what gpu_memory_utilization 0.95 leaves free (5%)
    memory_headroom_ratio          2  what gpu_memory_utilization 0.95 leaves free (5%)
ServescopeGpuMemoryLeakSuspected.md
    underutilised_ratio            1  an example: 50% more traffic
    memory_headroom_budget_share   1  an example: 50% more traffic
    blind_share                    1  an example: 50% more traffic
ServescopeGpuRowRemapPending.md
    gpu_saturated_sm_active_ratio  1  a quiet hour: utilisation well under 80%
ServescopeGpuSaturated.md
    gpu_saturated_sm_active_ratio  1  the batch controller's x0.8 step on max_num_seqs
ServescopeKvCachePressure.md
    gpu_saturated_sm_active_ratio  1  gpu_memory_utilization 0.8 of the operators' setup
    endpoints_ratio                1  an example: zero preemptions at 75% KV usage
ServescopeRequestQueueBuilding.md
    gpu_saturated_sm_active_ratio  1  the batch controller's x0.8 step on max_num_seqs
ServescopeServingEndpointDown.md
    leak_min_bytes_per_minute      1  the exporter's --vllm-max-bytes, 4 MiB
ServescopeSloBucketMissing.md
    slo_latency_le                 1  an example of buckets around a 0.5 s bound
    p99_threshold_seconds          1  an example of buckets around a 0.5 s bound
ServescopeThroughputBelowBaseline.md
    capacity_buffer_ratio          1  the rule's load tolerance, 20%
ServescopeCanarySloBurn.md
    capacity_regression_drop       1  an example: a canary taking 10 % of the traffic
ServescopeE2eSloBurnSlow.md
    capacity_regression_drop       2  the burn table's budget spent, 10% per day
ServescopeTtftSloBurnSlow.md
    capacity_regression_drop       2  the burn table's budget spent, 10% per day
ServescopeTtftP99High.md
    gpu_saturated_sm_active_ratio  1  the batch controller's x0.8 step on max_num_seqs
    slo_latency_le                 1  vLLM's TTFT buckets include 0.5 s
    p99_threshold_seconds          1  vLLM's TTFT buckets include 0.5 s
    slo_e2e_latency_le             1  the batch advisor's own 60 s window
    source_stale_min_seconds       1  the batch advisor's own 60 s window
gpu-memory
    slo_e2e_latency_le             1  the exporter's peak window, 60 s by default
    source_stale_min_seconds       1  the exporter's peak window, 60 s by default
load
    kv_pressure_ratio              1  a load step is invalid above 70 % of the client's own ceiling
"""


def _parse(table: str) -> dict[tuple[str, str], tuple[int, str]]:
    found: dict[tuple[str, str], tuple[int, str]] = {}
    name = ""
    for line in table.strip().splitlines():
        if not line.startswith(" "):
            name = line.strip()
            continue
        field, count, why = line.split(maxsplit=2)
        found[name, field] = (int(count), why)
    return found


COINCIDENCES = _parse(_TABLE)
