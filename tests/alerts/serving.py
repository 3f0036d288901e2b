"""The engines, GPUs and placement series the serving alert cases share.

Two GPUs on node-a, and engines of the same model on them: engine 0 (A) on GPU 0 with two worker PIDs,
engine 1 (B) on GPU 1; engine 2 (C) runs nowhere the placement tells.
"""

from __future__ import annotations

from tests.alerts.inputs import engine_gpu_info, gpu_facts
from tests.alerts.promtool import ENGINE, GPU, TARGET, series
from tests.alerts.slo import histogram

UTIL = "servescope_gpu_utilization_ratio"
KV = "servescope_serving_kv_cache_usage_ratio"
WAITING = "servescope_serving_requests_waiting"
RUNNING = "servescope_serving_requests_running"
STEPS = "servescope_serving_iteration_tokens_count"

GPU0 = GPU
GPU1 = {**TARGET, "gpu": "1", "uuid": "GPU-0001", "hostname": "node-a"}
GPU0_BY = {k: v for k, v in GPU0.items() if k != "job"}  # what `max by (instance, hostname, gpu, uuid)` keeps
ENGINE_A = ENGINE
ENGINE_B = {**TARGET, "model_name": "deepseek", "engine": "1", "endpoint": "http://10.0.0.1:8001/metrics"}
ENGINE_C = {**TARGET, "model_name": "deepseek", "engine": "2", "endpoint": "http://10.0.0.1:8002/metrics"}
ON_A = "deepseek engine 0 at http://10.0.0.1:8000/metrics"
ON_B = "deepseek engine 1 at http://10.0.0.1:8001/metrics"
ENGINE_KEYS = ("instance", "model_name", "engine", "endpoint")

# The KV alerts several modules check (single GPU, per engine, per pod) and the texts they share.
KV_PRESSURE = "ServescopeKvCachePressure"
COMBINED = "ServescopeGpuSaturatedKvPressure"
# Engine A's ticket: one per engine, whatever the number of its GPUs.
COMBINED_A = (
    f"{ON_A} uses 90% of its KV cache while GPUs it runs on node-a are compute-saturated: the TTFT objective "
    "holds; shed or queue load by priority, or add workers, before latency breaks."
)
HURTING = "ServescopeKvPressureHurtingRequests"
HURTING_TEXT = (
    "deepseek's time-to-first-token budget burns at a paging rate, and its engine at {endpoint} uses 90% of "
    "its KV cache while GPUs it runs on node-a are compute-saturated: shed load or add workers now."
)
HURTING_A = HURTING_TEXT.format(endpoint="http://10.0.0.1:8000/metrics")
# 100 requests a minute, all under the TTFT bound until minute 3, half of them over it from then: the
# model's TTFT budget burns at 50x, which the fast pair of windows sees from minute 5.
TTFT_BURN_FROM_3M = ((3, (100, 100)), (57, (100, 50)))
TTFT_HEALTHY = ((60, (100, 100)),)


def engine_on_gpu(engine: dict[str, str], gpu: dict[str, str]) -> dict[str, str]:
    """Labels of an alert on an engine spread onto one of its GPUs (job and pid folded away, the GPU's
    hostname joined on)."""
    keys = {k: engine[k] for k in ENGINE_KEYS}
    return {**keys, "hostname": gpu["hostname"], "gpu": gpu["gpu"], "uuid": gpu["uuid"]}


def engine_page(engine: dict[str, str], hostname: str = "node-a") -> dict[str, str]:
    """Labels of the per-engine page: the engine's keys and its node, no GPU (job and pid folded away)."""
    return {**{k: engine[k] for k in ENGINE_KEYS}, "hostname": hostname}


def node_gpu_facts(gpu: dict[str, str], minutes: int = 40, values: str = "") -> dict[str, str]:
    """servescope_gpu_info of a node-a GPU, its PCI bus after its index."""
    return gpu_facts(gpu, values or f"1x{minutes}", pci_bus_id=f"0000:1{gpu['gpu']}:00.0")


def stepping(engine: dict[str, str], minutes: int = 40) -> dict[str, str]:
    """The engine's step counter growing: it is running (vLLM's gauges refresh on steps only)."""
    return series(STEPS, engine, f"0+10x{minutes}")


PLACEMENT = [
    engine_gpu_info(ENGINE_A, GPU0, "4101", "1x40"),
    engine_gpu_info(ENGINE_A, GPU0, "4177", "1x40"),  # a second worker of engine A on the same GPU
    engine_gpu_info(ENGINE_B, GPU1, "5203", "1x40"),
    node_gpu_facts(GPU0),
    node_gpu_facts(GPU1),
    stepping(ENGINE_A),
    stepping(ENGINE_B),
]


def ttft(
    engine: dict[str, str], phases: tuple[tuple[int, tuple[int, int]], ...], minutes: int = 30
) -> list[dict[str, str]]:
    """The engine's TTFT histogram over `minutes` (1 min samples): (steps, (requests, under 0.5 s))."""
    return histogram("ttft", engine, _cut(phases, minutes))


def _cut(phases: tuple[tuple[int, tuple[int, int]], ...], minutes: int) -> list[tuple[int, tuple[int, int]]]:
    cut, left = [], minutes
    for steps, rates in phases:
        if left <= 0:
            break
        cut.append((min(steps, left), rates))
        left -= steps
    return cut


def kv_pressure_text(on: str, percent: int) -> str:
    """The KV pressure ticket's text for the engine `on` names, at `percent` of its KV cache."""
    return (
        f"{on} uses {percent}% of its KV cache while running: start OOM prevention (shorter max sequence "
        "length, more GPU memory)."
    )
