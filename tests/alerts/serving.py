"""The engines, GPUs and placement series the serving alert cases share.

Two GPUs on node-a, and engines of the same model on them: engine 0 (A) on GPU 0 with two worker PIDs,
engine 1 (B) on GPU 1; engine 2 (C) runs nowhere the placement tells.
"""

from __future__ import annotations

from tests.alerts.inputs import engine_gpu_info, gpu_facts
from tests.alerts.promtool import ENGINE, GPU, TARGET, series

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
KV_PRESSURE_TAIL = " while running: start OOM prevention (shorter max sequence length, more GPU memory)."
COMBINED = "ServescopeGpuSaturatedKvPressure"
# Engine A's warning on one of its GPUs, whose labels fill in {gpu} and {uuid}.
COMBINED_A = (
    f"{ON_A} uses 90% of its KV cache while its GPU {{gpu}} on node-a ({{uuid}}) is compute-saturated: no "
    "request suffers yet; shed or queue load by priority before latency breaks."
)
HURTING = "ServescopeKvPressureHurtingRequests"
HURTING_A = (
    f"{ON_A} uses 90% of its KV cache while GPUs it runs on node-a are compute-saturated, and requests "
    "wait, are preempted or miss the TTFT objective: shed load now."
)


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
