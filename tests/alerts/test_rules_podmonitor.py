"""promtool cases of the engine-to-GPU joins in both topologies: the exporter's (servescope_serving_* joined
by servescope_engine_gpu_info) and the PodMonitor's (the engines' own vllm:* series joined to
servescope_gpu_pod_info on `namespace, pod`), each against the rules built for it.

The same fleet in both: on node-a, pod llm/ds-a (a TP=2 engine) and pod llm/ds-b serve engine 0 of the
same model, so nothing but the pod tells them apart. 1 min samples, as test_rules_serving: KV at 90% from
minute 5, the model's TTFT budget burning from minute 3; the page fires at 7m, the combined ticket at 10m.
No `CASES` here: test_coverage counts the exporter topology's modules, and these cases repeat alerts
that those cover, in another topology.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.core.config import AlertsConfig
from tests.alerts.promtool import RULES, case, check, fires, run_promtool, series
from tests.alerts.serving import (
    COMBINED,
    HURTING,
    HURTING_TEXT,
    KV_PRESSURE,
    kv_pressure_text,
    node_gpu_facts,
)
from tests.alerts.slo import SLIS, counter

POD_CONFIG = AlertsConfig(engine_topology="podmonitor")
NODE = "node-a"
# Both monitors set instance to the node's name (deploy/scraping.py).
EXPORTER = {"job": "servescope", "instance": NODE}
GPUS = [{**EXPORTER, "gpu": str(n), "uuid": f"GPU-000{n}", "hostname": NODE} for n in range(3)]
PODS = {
    "ds-a": {
        "namespace": "llm",
        "pod": "ds-a",
        "container": "vllm",
        "endpoint": "http://10.1.0.5:8000/metrics",
    },
    "ds-b": {
        "namespace": "llm",
        "pod": "ds-b",
        "container": "vllm",
        "endpoint": "http://10.1.0.6:8000/metrics",
    },
}
ENGINE = {"model_name": "deepseek", "engine": "0"}
KV_90 = "0.5x4 0.9x25"
WAITING_FROM_3M = "0x2 3x27"
MINUTES = 30
# Requests a minute and those under 0.5 s: all good for 3 minutes, then half (a 50x burn).
TTFT_GOOD = counter([(3, 100), (27, 50)])
TTFT_ALL = counter([(30, 100)])


class Topology:
    """The series one engine and its GPUs give Prometheus in a topology, and the alert labels they make."""

    def __init__(self, podmonitor: bool) -> None:
        self.podmonitor = podmonitor

    def engine(self, pod: str, engine: str = "0") -> dict[str, str]:
        if self.podmonitor:
            return {"job": "vllm", "instance": NODE, **PODS[pod], **ENGINE, "engine": engine}
        return {**EXPORTER, **ENGINE, "engine": engine, "endpoint": PODS[pod]["endpoint"]}

    def name(self, signal: str) -> str:
        exporter = {
            "kv": "servescope_serving_kv_cache_usage_ratio",
            "waiting": "servescope_serving_requests_waiting",
            "steps": "servescope_serving_iteration_tokens_count",
        }
        pod = {
            "kv": "vllm:kv_cache_usage_perc",
            "waiting": "vllm:num_requests_waiting",
            "steps": "vllm:iteration_tokens_total_count",
        }
        return (pod if self.podmonitor else exporter)[signal]

    def placement(self, pod: str, gpu: dict[str, str], pid: str) -> dict[str, str]:
        """What tells Prometheus that `pod`'s engine runs on `gpu`."""
        if self.podmonitor:
            return series("servescope_gpu_pod_info", {**gpu, **_pod_keys(pod)}, f"1x{MINUTES}")
        labels = {**self.engine(pod), "uuid": gpu["uuid"], "gpu": gpu["gpu"], "pid": pid}
        return series("servescope_engine_gpu_info", labels, f"1x{MINUTES}")

    def serving(self, pod: str, kv: str, engine: str = "0") -> list[dict[str, str]]:
        labels = self.engine(pod, engine)
        ttft = "vllm:time_to_first_token_seconds" if self.podmonitor else SLIS["ttft"][0]
        return [
            series(self.name("kv"), labels, kv),
            series(self.name("waiting"), labels, WAITING_FROM_3M),
            series(self.name("steps"), labels, f"0+10x{MINUTES}"),
            series(f"{ttft}_bucket", {**labels, "le": "0.5"}, TTFT_GOOD),
            series(f"{ttft}_bucket", {**labels, "le": "+Inf"}, TTFT_ALL),
            series(f"{ttft}_count", labels, TTFT_ALL),
        ]

    def engine_keys(self, pod: str) -> dict[str, str]:
        """An engine's labels once folded onto its GPUs: the pod's keys in the PodMonitor topology (its
        ranks are one unit there), the engine's in the exporter's."""
        if self.podmonitor:
            pod_keys = {k: PODS[pod][k] for k in ("namespace", "pod", "endpoint")}
            return {"instance": NODE, **pod_keys, "model_name": ENGINE["model_name"]}
        return {"instance": NODE, **ENGINE, "endpoint": PODS[pod]["endpoint"]}


def _pod_keys(pod: str) -> dict[str, str]:
    return {k: PODS[pod][k] for k in ("namespace", "pod", "container")}


def _labels(keys: dict[str, str], **extra: str) -> dict[str, str]:
    """Alert labels: promtool leaves out the empty ones."""
    return {k: v for k, v in {**keys, **extra}.items() if v}


def _on(topology: Topology, pod: str, folded: bool = True) -> str:
    """How an alert names the engine: a page or warning folded onto GPUs has no engine in a pod's unit."""
    engine = "" if topology.podmonitor and folded else "0"
    return f"deepseek engine {engine} at {PODS[pod]['endpoint']}"


def tensor_parallel(topology: Topology) -> dict[str, Any]:
    """ds-a on saturated GPUs 0 and 1, out of KV cache with requests waiting: one page, a warning per GPU."""
    gpus = GPUS[:2]
    keys = topology.engine_keys("ds-a")
    on_a = _on(topology, "ds-a")
    page = HURTING_TEXT.format(endpoint=PODS["ds-a"]["endpoint"])
    ticket = (
        f"{on_a} uses 90% of its KV cache while GPUs it runs on node-a are compute-saturated: the TTFT "
        "objective holds; shed or queue load by priority, or add workers, before latency breaks."
    )
    return case(
        f"{'podmonitor' if topology.podmonitor else 'exporter'}: TP=2 engine pages once",
        [
            *(series("servescope_gpu_utilization_ratio", gpu, f"0.95x{MINUTES}") for gpu in gpus),
            *(node_gpu_facts(gpu, MINUTES) for gpu in gpus),
            *(topology.placement("ds-a", gpu, str(4100 + n)) for n, gpu in enumerate(gpus)),
            *topology.serving("ds-a", KV_90),
        ],
        check(HURTING, "6m"),  # pending
        fires(HURTING, "7m", _labels(keys, hostname=NODE), page),
        check(COMBINED, "9m"),  # pending
        fires(COMBINED, "10m", _labels(keys, hostname=NODE), ticket),  # once for the engine, not per GPU
    )


def pods_apart(topology: Topology) -> dict[str, Any]:
    """ds-a at 90% KV on an idle GPU 0, ds-b at 20% on a saturated GPU 1, both with requests waiting:
    neither the page nor the warning joins ds-a's KV to ds-b's GPU; ds-a's KV pressure alone alerts."""
    kv_labels = topology.engine("ds-a")
    return case(
        f"{'podmonitor' if topology.podmonitor else 'exporter'}: two pods of a node kept apart",
        [
            series("servescope_gpu_utilization_ratio", GPUS[0], f"0.1x{MINUTES}"),
            series("servescope_gpu_utilization_ratio", GPUS[1], f"0.95x{MINUTES}"),
            *(node_gpu_facts(gpu, MINUTES) for gpu in GPUS[:2]),
            topology.placement("ds-a", GPUS[0], "4101"),
            topology.placement("ds-b", GPUS[1], "4201"),
            *topology.serving("ds-a", KV_90),
            *topology.serving("ds-b", f"0.2x{MINUTES}"),
        ],
        check(HURTING, "20m"),
        check(COMBINED, "20m"),
        fires(
            KV_PRESSURE,
            "20m",
            kv_labels,
            kv_pressure_text(_on(topology, "ds-a", folded=False), 90),
        ),
    )


POD = Topology(podmonitor=True)
# Data-parallel ranks in one pod: Prometheus cannot tell which of the pod's GPUs each rank holds, so the
# pod is one unit (its highest KV usage): one page for the pod, not a rank-by-GPU cross product.
DP_IN_ONE_POD: dict[str, Any] = case(
    "podmonitor: two data-parallel ranks in one pod page once",
    [
        *(series("servescope_gpu_utilization_ratio", gpu, f"0.95x{MINUTES}") for gpu in GPUS[:2]),
        *(node_gpu_facts(gpu, MINUTES) for gpu in GPUS[:2]),
        *(POD.placement("ds-a", gpu, "") for gpu in GPUS[:2]),
        *POD.serving("ds-a", KV_90, engine="0"),
        *POD.serving("ds-a", f"0.2x{MINUTES}", engine="1"),
    ],
    fires(
        HURTING,
        "7m",
        _labels(POD.engine_keys("ds-a"), hostname=NODE),
        HURTING_TEXT.format(endpoint=PODS["ds-a"]["endpoint"]),
    ),
)


def pod_rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules-podmonitor.yaml"
    path.write_text(yaml.safe_dump(rule_file(POD_CONFIG), sort_keys=False, width=120))
    return path


@pytest.mark.e2e
def test_exporter_topology_joins_engines_to_their_gpus(tmp_path: Path) -> None:
    exporter = Topology(podmonitor=False)
    run_promtool([tensor_parallel(exporter), pods_apart(exporter)], tmp_path)


@pytest.mark.e2e
def test_podmonitor_topology_joins_engines_to_their_pod_s_gpus(tmp_path: Path) -> None:
    run_promtool([tensor_parallel(POD), pods_apart(POD), DP_IN_ONE_POD], tmp_path, rules=pod_rules(tmp_path))


def test_the_podmonitor_build_reads_the_engines_own_series_and_joins_on_the_pod() -> None:
    expressions = [rule["expr"] for group in rule_file(POD_CONFIG)["groups"] for rule in group["rules"]]
    joined = [expr for expr in expressions if "servescope_gpu_pod_info" in expr]
    assert joined, "no rule joins engines to GPUs through servescope_gpu_pod_info"
    assert all("on (namespace, pod)" in expr for expr in joined)
    assert not any("servescope_engine_gpu_info" in expr for expr in expressions)
    assert not any("servescope_serving_kv_cache_usage_ratio" in expr for expr in expressions)
    assert any('vllm:kv_cache_usage_perc{job="vllm"}' in expr for expr in expressions)


def test_alerts_build_writes_the_podmonitor_variant_on_request(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from servescope.bundle.alerts.cli import app

    result = CliRunner().invoke(app, ["build", "--topology", "podmonitor", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "servescope_gpu_pod_info" in (tmp_path / "rules.yaml").read_text()
    # The committed build is the exporter topology's: the PodMonitor variant differs from it.
    stale = CliRunner().invoke(
        app, ["build", "--topology", "podmonitor", "--check", "--out", str(RULES.parent)]
    )
    assert stale.exit_code == 1 and "rules.yaml" in stale.output
    assert "servescope_gpu_pod_info" not in RULES.read_text()
