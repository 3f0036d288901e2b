"""A fleet's series as Prometheus holds them in either topology, and the ground truth they come from.

Exporter topology: each node's exporter (job `servescope`, instance the node) exports its GPUs, and the
engines it finds, normalised (`servescope_serving_*`), with their health (`servescope_source_up`) and pod
(`servescope_serving_endpoint_pod_info`): a pod loading its model is not found yet, a pod whose engine
does not answer is reported down while the kubelet lists it, a deleted pod's endpoint is dropped (the
exporter's retention, exporter/vllm/retention.py). PodMonitor topology: Prometheus scrapes every engine
pod itself (job `vllm`, the engines' own `vllm:*` names, `up` 0 while it does not answer), the exporter
exports the GPUs and which pod holds each (`servescope_gpu_pod_info`). kube-state-metrics lists the GPU
nodes and the pods being deleted in both.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from servescope.core.config import AlertsConfig
from servescope.core.topology import source

from .fleet_model import ANSWERING, GIB, STEP, VLLM_E2E_BUCKETS, Fleet, Latency, Node, Pod
from .rule_engine import series as input_series

EXPORTER = {"job": "servescope"}
KSM = {"job": "kube-state-metrics", "instance": "kube-state-metrics:8080"}
Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Truth:
    """Per model and step: requests finished, those over each SLI's bound, and the endpoints that should
    serve and do not (a crash loop's down time, a dead or hung engine)."""

    requests: dict[str, list[float]] = field(default_factory=dict)
    ttft_over: dict[str, list[float]] = field(default_factory=dict)
    e2e_over: dict[str, list[float]] = field(default_factory=dict)
    should_serve: dict[str, list[int]] = field(default_factory=dict)
    unavailable: dict[str, list[int]] = field(default_factory=dict)

    def add(self, table: dict[str, list[Any]], model: str, steps: int, index: int, value: float) -> None:
        table.setdefault(model, [0] * steps)[index] += value


@dataclass
class Recorder:
    """Samples per series and step; a series without a sample at a step has None there."""

    steps: int
    values: dict[Key, list[float | None]] = field(default_factory=dict)

    def put(self, name: str, labels: dict[str, str], index: int, value: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.values.setdefault(key, [None] * self.steps)[index] = value

    def input_series(self) -> Iterator[dict[str, Any]]:
        for (name, labels), per_step in sorted(self.values.items()):
            yield input_series(name, dict(labels), per_step)


@dataclass
class EngineCounters:
    """An engine's counters since its container last started (a restart resets them)."""

    restarts: int = -1
    values: dict[Key, float] = field(default_factory=dict)

    def add(self, name: str, labels: dict[str, str], amount: float) -> float:
        key = (name, tuple(sorted(labels.items())))
        self.values[key] = self.values.get(key, 0.0) + amount
        return self.values[key]


@dataclass(frozen=True)
class Step:
    """One engine's step: its requests, labels, step index and counters."""

    n: float
    labels: dict[str, str]
    index: int
    counters: EngineCounters


class FleetSeries:
    """Writes the fleet's series for one topology and seed, step by step, and records the truth."""

    def __init__(self, fleet: Fleet, podmonitor: bool, seed: int) -> None:
        self.fleet, self.podmonitor = fleet, podmonitor
        self.cfg = AlertsConfig(engine_topology="podmonitor" if podmonitor else "exporter")
        self.random = random.Random(seed)
        self.n = len(fleet.steps()) + 1
        self.out = Recorder(self.n)
        self.truth = Truth()
        self.counters: dict[str, EngineCounters] = {}
        self.frozen: dict[str, dict[str, float]] = {}  # a hung engine's gauges keep their last values
        self.served: set[str] = set()  # pods whose engine answered at least once

    def run(self) -> tuple[list[dict[str, Any]], Truth]:
        for index in range(self.n):
            t = index * STEP
            for node in self.fleet.nodes:
                self._node(node, index, t)
            if self.fleet.kube_state_metrics:
                self._cluster(index, t)
            for pod in self.fleet.pods:
                self._engine(pod, index, t)
        return list(self.out.input_series()), self.truth

    # --- nodes and GPUs ----------------------------------------------------------------------------
    def _node(self, node: Node, index: int, t: float) -> None:
        state = node.exporter(t)
        if state == "absent":
            return
        self.out.put("up", {**EXPORTER, "instance": node.name}, index, 1.0 if state == "up" else 0.0)
        if state != "up":
            return
        for gpu in range(node.gpus):
            labels = {
                **EXPORTER,
                "instance": node.name,
                "gpu": str(gpu),
                "uuid": f"GPU-{node.name}-{gpu}",
                "hostname": node.name,
            }
            holder = self._holder(node, gpu, t)
            busy = self.fleet.model(holder.model).busy(t) if holder and holder.state(t) in ANSWERING else 0.02
            busy = min(1.0, max(0.0, busy + self.random.gauss(0, 0.01)))
            used = (
                60 * GIB
                + node.memory_per_busy * busy
                + node.leak(gpu, t)
                + 64 * 1024**2 * self.random.random()
            )
            for name, value in (
                ("servescope_gpu_up", 1.0),
                ("servescope_gpu_utilization_ratio", round(busy, 4)),
                ("servescope_gpu_memory_used_bytes", float(int(used))),
                ("servescope_gpu_memory_total_bytes", node.total_memory),
                ("servescope_gpu_memory_leak_suspected", 0.0),
            ):
                self.out.put(name, labels, index, value)
            self.out.put("servescope_gpu_info", {**labels, "gpu_model": "H200"}, index, 1.0)
            if self.podmonitor and holder is not None:
                pod = {"namespace": holder.namespace, "pod": holder.name, "container": "vllm"}
                self.out.put("servescope_gpu_pod_info", {**labels, **pod}, index, 1.0)

    def _holder(self, node: Node, gpu: int, t: float) -> Pod | None:
        """The pod the kubelet allocated the GPU to (any state but gone)."""
        return next(
            (p for p in self.fleet.pods if p.node == node.name and gpu in p.gpus and p.state(t)), None
        )

    def _cluster(self, index: int, t: float) -> None:
        for node in self.fleet.nodes:
            self.out.put("kube_node_info", {**KSM, "node": node.name}, index, 1.0)
            capacity = {**KSM, "node": node.name, "resource": "nvidia_com_gpu"}
            self.out.put("kube_node_status_capacity", capacity, index, float(node.gpus))
        for pod in self.fleet.pods:
            # kube-state-metrics is scraped as the rest: it says a pod is being deleted a scrape after
            # its engine got SIGTERM and stopped (and forgets it a scrape late).
            if pod.state(t - STEP) == "terminating":
                keys = {**KSM, "namespace": pod.namespace, "pod": pod.name}
                self.out.put("kube_pod_deletion_timestamp", keys, index, 1.7e9)

    # --- engines -----------------------------------------------------------------------------------
    def _engine(self, pod: Pod, index: int, t: float) -> None:
        state = pod.state(t)
        model = self.fleet.model(pod.model)
        if state is not None and state not in ("loading", "terminating"):
            self._truth_availability(pod, index, state)
        if state in ANSWERING:
            self.served.add(pod.name)
        if state is None:
            return
        node = next(n for n in self.fleet.nodes if n.name == pod.node)
        labels = self._labels(pod)
        answering = state in ANSWERING
        if self.podmonitor:
            target = {k: labels[k] for k in ("job", "instance", "namespace", "pod", "container", "endpoint")}
            self.out.put("up", target, index, 1.0 if answering else 0.0)
        elif node.exporter(t) == "up" and state != "loading" and pod.name in self.served:
            health = {**EXPORTER, "instance": pod.node, "endpoint": pod.endpoint}
            self.out.put(
                "servescope_source_up", {**health, "source": "vllm"}, index, 1.0 if answering else 0.0
            )
            info = {**health, "namespace": pod.namespace, "pod": pod.name, "container": "vllm"}
            self.out.put("servescope_serving_endpoint_pod_info", info, index, 1.0)
        if not answering or (not self.podmonitor and node.exporter(t) != "up"):
            if answering:
                self._serve(pod, model, index, t, state, record=False)
            return
        self._serve(pod, model, index, t, state, record=True)
        if not self.podmonitor:
            for gpu in pod.gpus:
                join = {**labels, "uuid": f"GPU-{pod.node}-{gpu}", "gpu": str(gpu), "pid": str(4000 + gpu)}
                self.out.put("servescope_engine_gpu_info", join, index, 1.0)

    def _labels(self, pod: Pod) -> dict[str, str]:
        engine = {"model_name": pod.model, "engine": "0", "endpoint": pod.endpoint}
        if self.podmonitor:
            target = {"job": "vllm", "instance": pod.node, "namespace": pod.namespace, "pod": pod.name}
            return {**target, "container": "vllm", **engine}
        return {**EXPORTER, "instance": pod.node, **engine}

    def _truth_availability(self, pod: Pod, index: int, state: str) -> None:
        """A pod that served and is not being deleted should serve; down or hung, it does not."""
        if pod.name not in self.served and state not in ANSWERING:
            return
        self.truth.add(self.truth.should_serve, pod.model, self.n, index, 1)
        if state not in ("serving", "crashloop-up"):
            self.truth.add(self.truth.unavailable, pod.model, self.n, index, 1)

    def _serve(self, pod: Pod, model: Any, index: int, t: float, state: str, *, record: bool) -> None:
        """One step of an engine that answers: its requests (and their truth), counters and gauges."""
        counters = self.counters.setdefault(pod.name, EngineCounters())
        restarts = pod.restarts(t)
        if restarts != counters.restarts:
            counters.restarts, counters.values = restarts, {}  # a new container: counters from zero
        sharing = [p for p in self.fleet.answering(pod.model, t) if p.state(t) != "hung"]
        hung = state == "hung"
        per_engine = 0.0 if hung or not sharing else model.load(t) / len(sharing)
        n = max(0.0, per_engine * STEP * (1 + self.random.gauss(0, 0.03)))
        ttft, e2e = model.ttft(t), model.e2e(t)
        self._count(pod.model, index, n, ttft, e2e)
        if not record:
            return
        labels = self._labels(pod)
        gauges = self.frozen.get(pod.name) if hung else None
        if gauges is None:
            gauges = {
                "servescope_serving_kv_cache_usage_ratio": min(
                    1.0, max(0.0, model.kv(t) + self.random.gauss(0, 0.01))
                ),
                "servescope_serving_requests_running": round(max(1.0, per_engine * e2e.median)),
                "servescope_serving_requests_waiting": float(round(model.waiting(t))),
            }
            self.frozen[pod.name] = gauges
        for name, value in gauges.items():
            self._put(name, labels, index, value)
        steps = 0.0 if hung else STEP / 0.05
        for name, amount in (
            ("servescope_serving_generation_tokens_total", n * 64),
            ("servescope_serving_prompt_tokens_total", n * 512),
            ("servescope_serving_preemptions_total", 0.0 if hung else model.preemptions(t) * STEP),
            ("servescope_serving_iteration_tokens_count", steps),
        ):
            self._put(name, labels, index, counters.add(name, labels, amount))
        done = {**labels, "finished_reason": "stop"}
        self._put("servescope_serving_request_success_total", done, index, counters.add("success", done, n))
        at = Step(n, labels, index, counters)
        self._histogram("servescope_serving_time_to_first_token_seconds", model.ttft_buckets, ttft, at)
        self._histogram("servescope_serving_e2e_request_latency_seconds", VLLM_E2E_BUCKETS, e2e, at)

    def _count(self, model: str, index: int, n: float, ttft: Latency, e2e: Latency) -> None:
        """The truth of a step's requests: how many, how many over each SLO's bound."""
        truth = self.truth
        truth.add(truth.requests, model, self.n, index, n)
        truth.add(truth.ttft_over, model, self.n, index, n * ttft.share_over(float(self.cfg.slo_latency_le)))
        truth.add(
            truth.e2e_over, model, self.n, index, n * e2e.share_over(float(self.cfg.slo_e2e_latency_le))
        )

    def _histogram(self, name: str, bounds: tuple[float, ...], latency: Latency, at: Step) -> None:
        for bound in (*bounds, float("inf")):
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            bucket = {**at.labels, "le": le}
            below = at.n * (1.0 - latency.share_over(bound)) if bound != float("inf") else at.n
            self._put(f"{name}_bucket", bucket, at.index, at.counters.add(f"{name}_bucket", bucket, below))
        self._put(f"{name}_count", at.labels, at.index, at.counters.add(f"{name}_count", at.labels, at.n))

    def _put(self, name: str, labels: dict[str, str], index: int, value: float) -> None:
        """A serving series under the topology's name (the engines' own in the PodMonitor one)."""
        series_name, _ = source(self.cfg, name)
        self.out.put(series_name, labels, index, value)
