"""promtool cases of ServescopeHealthyEndpointsLow (group servescope-engine) and the endpoint count record:
healthy endpoints per model below 75% of the day's median, for 15m, while the model's Deployments miss
replicas they want (kube-state-metrics): a scale-down is no failure.

The baseline needs a day: 5 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import TARGET, case, check, firing, run_promtool, series

LOW = "ServescopeHealthyEndpointsLow"
KV = "servescope_serving_kv_cache_usage_ratio"


KSM = {"job": "kube-state-metrics", "namespace": "llm"}


def _endpoint(model: str, n: int) -> dict[str, str]:
    address = f"10.{1 + len(model)}.{ord(model[0])}.{n}"  # a pod IP per model and endpoint
    return {**TARGET, "model_name": model, "engine": "0", "endpoint": f"http://{address}:8000/metrics"}


def _deployment(model: str, pods: int, unavailable: str) -> list[dict[str, str]]:
    """The Deployment `model` whose ReplicaSet owns the pods of the model's first `pods` endpoints (the
    exporter names each endpoint's pod), and its unavailable replicas over time."""
    found = [
        series(
            "kube_replicaset_owner",
            {**KSM, "replicaset": f"{model}-7d9f", "owner_kind": "Deployment", "owner_name": model},
            "1x300",
        ),
        series("kube_deployment_status_replicas_unavailable", {**KSM, "deployment": model}, unavailable),
    ]
    for n in range(1, pods + 1):
        pod = {"namespace": "llm", "pod": f"{model}-7d9f-{n}"}
        found.append(
            series(
                "servescope_serving_endpoint_pod_info",
                {**TARGET, "endpoint": _endpoint(model, n)["endpoint"], **pod, "container": "vllm"},
                "1x300",
            )
        )
        found.append(
            series(
                "kube_pod_owner",
                {**KSM, **pod, "owner_kind": "ReplicaSet", "owner_name": f"{model}-7d9f"},
                "1x300",
            )
        )
    return found


# deepseek runs 4 endpoints for a day; 2 die at 24h (their series go) and their Deployment wants them
# back (2 unavailable: no GPU to schedule them on). qwen loses 1 of 4 at 24h: 3 is 75%, not under. llama's
# only endpoint dies at 24h: its count is gone, read as 0. mistral is scaled down from 4 to 2 at 24h: its
# Deployment wants 2 and has them. At 12h the deepseek endpoints drop to 2 as well, but without a day of
# baseline nothing is judged.
DAY = "0.4x287"


def _low(model: str, count: int) -> str:
    return (
        f"{model} has {count} endpoints answering, under 75% of its median of the last day: engines died and "
        "were not replaced, and requests no engine answers leave no latency sample to burn the SLO."
    )


LOW_CASE = case(
    LOW,
    [
        series(KV, _endpoint("deepseek", 1), f"{DAY} 0.4x30"),
        series(KV, _endpoint("deepseek", 2), f"{DAY} 0.4x30"),
        # 3 and 4 also go away from 12h to 12h50 (a rollout) and die at 24h.
        *(series(KV, _endpoint("deepseek", n), "0.4x143 stale _x10 0.4x132 stale") for n in (3, 4)),
        *(series(KV, _endpoint("qwen", n), f"{DAY} 0.4x30") for n in (1, 2, 3)),
        series(KV, _endpoint("qwen", 4), f"{DAY} stale"),
        series(KV, _endpoint("llama", 1), f"{DAY} stale"),
        *(series(KV, _endpoint("mistral", n), f"{DAY} 0.4x30") for n in (1, 2)),
        *(series(KV, _endpoint("mistral", n), f"{DAY} stale") for n in (3, 4)),
        *_deployment("deepseek", 4, "0x287 2x30"),
        *_deployment("llama", 1, "0x287 1x30"),
        *_deployment("mistral", 4, "0x320"),
    ],
    check(LOW, "12h30m"),  # 2 of 4, but no day of baseline yet
    check(LOW, "24h10m"),  # pending since 24h
    check(
        LOW,
        "24h15m",
        firing(LOW, {"model_name": "deepseek"}, _low("deepseek", 2)),
        firing(LOW, {"model_name": "llama"}, _low("llama", 0)),
    ),
    interval="5m",
)
CASES = [LOW_CASE]


@pytest.mark.e2e
def test_healthy_endpoints(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="5m")
