"""Fleet scenarios about serving: planned changes (a rolling update, a scale-down, a pod moved), a crash
loop, KV-bound engines (through a scrape gap, beside a healthy model), slow answers, causes while the SLO
holds, and a histogram without the SLO's bound."""

from __future__ import annotations

from .fleet_model import Fleet, Latency, Model, Node, Phase, constant, window
from .fleet_plan import KV_CAUSES, MINUTE, FleetPlan, nodes, pod, replaced
from .fleet_truth import FleetIncident, availability_burn, during, latency_burn


def rolling_update() -> FleetPlan:
    """8 replicas replaced 2 at a time every 12 min from 10m on 4 nodes of 3 GPUs (maxSurge 2, maxUnavailable
    0): the new pods load for 4 min on free GPUs, then 2 old ones are deleted (1 min terminating)."""
    pods = []
    for i in range(8):
        batch = i // 2
        start = (10 + 12 * batch) * MINUTE
        node = i % 4 + 1
        pods.append(pod(f"ds-old-{i}", "deepseek", node, i // 4, *replaced(start)))
        new_gpu = 2 if batch < 2 else 0  # the spare GPU, then those the first batches freed
        loading = (Phase(start, "loading"), Phase(start + 4 * MINUTE, "serving"))
        pods.append(pod(f"ds-new-{i}", "deepseek", node, new_gpu, *loading, address=20))
    fleet = Fleet(
        "rolling-update-8",
        "8 replicas of deepseek replaced 2 at a time every 12 min (4 nodes of 3 GPUs)",
        70,
        nodes(4, 3),
        (Model("deepseek", load=constant(8.0)),),
        tuple(pods),
    )
    return FleetPlan(fleet)


def scale_down_and_move() -> FleetPlan:
    """qwen scaled from 3 replicas to 2 at 20m; one of llama's 2 replicas moved from node-1 to node-2 at
    30m (its new pod loads for 5 min)."""
    pods = (
        pod("qwen-0", "qwen", 1, 0),
        pod("qwen-1", "qwen", 2, 0),
        pod("qwen-2", "qwen", 3, 0, *replaced(20 * MINUTE, loading=0.0)),
        pod("llama-0", "llama", 3, 1),
        pod("llama-1", "llama", 1, 1, *replaced(30 * MINUTE, loading=0.0)),
        pod(
            "llama-2", "llama", 2, 1, Phase(30 * MINUTE, "loading"), Phase(35 * MINUTE, "serving"), address=20
        ),
    )
    models = (Model("qwen", load=constant(3.0)), Model("llama", load=constant(2.0)))
    fleet = Fleet(
        "scale-down-and-move",
        "qwen scaled 3 -> 2 at 20m; a llama pod moved to another node at 30m",
        60,
        nodes(3),
        models,
        pods,
    )
    return FleetPlan(fleet)


def crash_loop() -> FleetPlan:
    """One of mistral's 3 replicas crash-loops from 15m to 45m (its container restarts every 5 min and
    answers a minute before it crashes again), then serves."""
    looping = (Phase(0.0, "serving"), Phase(15 * MINUTE, "crashloop"), Phase(45 * MINUTE, "serving"))
    pods = (
        pod("mistral-0", "mistral", 1, 0),
        pod("mistral-1", "mistral", 2, 0),
        pod("mistral-2", "mistral", 3, 0, *looping),
    )
    fleet = Fleet(
        "crash-loop",
        "1 of mistral's 3 replicas crash-loops from 15m to 45m",
        60,
        nodes(3),
        (Model("mistral"),),
        pods,
    )
    endpoint = (("endpoint", pods[2].endpoint),)
    incidents = (
        FleetIncident(
            "mistral's endpoints unavailable",
            availability_burn("mistral"),
            ("ServescopeAvailabilitySloBurnFast",),
            ("ServescopeServingEndpointDown", "ServescopeEngineRestartLoop"),
            (("model_name", "mistral"),),
        ),
        FleetIncident(
            "mistral-2 crash-loops",
            during(15, 45),
            ("ServescopeServingEndpointDown",),
            ("ServescopeEngineRestartLoop", "ServescopeAvailabilitySloBurnFast"),
            endpoint,
        ),
    )
    return FleetPlan(fleet, incidents)


def kv_burn(name: str, gap: bool, two_models: bool) -> FleetPlan:
    """deepseek's engines out of KV on saturated GPUs from 15m to 45m: half the first tokens over 0.5 s.
    `gap`: Prometheus cannot scrape the exporters from 25m to 28m. `two_models`: qwen shares the nodes and
    stays healthy."""
    burning = (15 * MINUTE, 45 * MINUTE)
    deepseek = Model(
        "deepseek",
        load=constant(6.0),
        ttft=lambda t: Latency(0.5) if burning[0] <= t < burning[1] else Latency(0.12),
        kv=window(constant(0.4), 0.93, *burning),
        busy=window(constant(0.5), 0.96, *burning),
        waiting=window(constant(0.0), 8.0, *burning),
    )
    models = (deepseek, Model("qwen", load=constant(2.0))) if two_models else (deepseek,)
    pods = [pod("ds-0", "deepseek", 1, 0), pod("ds-1", "deepseek", 2, 0)]
    if two_models:
        pods += [pod("qwen-0", "qwen", 1, 1), pod("qwen-1", "qwen", 2, 1)]
    scrape = (lambda t: "down" if 25 * MINUTE <= t < 28 * MINUTE else "up") if gap else (lambda t: "up")
    what = (
        "deepseek out of KV on saturated GPUs 15-45m"
        + (", the exporters unscraped 25-28m" if gap else "")
        + (", qwen healthy beside it" if two_models else "")
    )
    fleet = Fleet(
        name, what, 70, tuple(Node(f"node-{i}", 2, exporter=scrape) for i in (1, 2)), models, tuple(pods)
    )
    incident = FleetIncident(
        "deepseek's TTFT budget burns (KV-bound engines)",
        latency_burn("deepseek", "ttft"),
        ("ServescopeTtftSloBurnFast", "ServescopeKvPressureHurtingRequests"),
        (*KV_CAUSES, "ServescopeExporterDown"),
        (("model_name", "deepseek"),),
    )
    causes = FleetIncident("deepseek KV-bound", during(15, 45), (), KV_CAUSES, (("model_name", "deepseek"),))
    gpus = FleetIncident("deepseek's GPUs saturated", during(15, 45), (), ("ServescopeGpuSaturated",))
    return FleetPlan(fleet, (incident, causes, gpus))


def quiet_causes(name: str) -> FleetPlan:
    """The TTFT objective holds while a cause shows: a small steady queue (2-6 waiting, P99 ~370 ms), or a
    12-minute preemption spike (P99 ~280 ms). Neither is an incident."""
    if name == "small-steady-queue":
        model = Model(
            "llama", ttft=lambda t: Latency(0.13), kv=constant(0.6), waiting=lambda t: 2 + (t // 60) % 5
        )
        what = "2-6 requests waiting throughout, P99 TTFT ~370 ms"
    else:
        model = Model(
            "llama",
            ttft=lambda t: Latency(0.1),
            kv=constant(0.65),
            preemptions=window(constant(0.0), 1.0, 10 * MINUTE, 22 * MINUTE),
        )
        what = "1 preemption/s per engine 10-22m, P99 TTFT ~280 ms"
    fleet = Fleet(
        name, what, 40, nodes(2), (model,), (pod("llama-0", "llama", 1, 0), pod("llama-1", "llama", 2, 0))
    )
    if name == "small-steady-queue":
        return FleetPlan(fleet)
    # 12 minutes of preemptions stay in the 5 min rate for 17: the ticket may say so at its end; no page.
    spike = FleetIncident(
        "preemptions 10-22m", during(10, 22), (), ("ServescopePreemptionsSustained",), grace_s=10 * MINUTE
    )
    return FleetPlan(fleet, (spike,))


def no_bound_bucket() -> FleetPlan:
    """gemma's TTFT buckets jump from 0.25 s to 1.0 s (no 0.5): healthy (P99 ~0.23 s) for 30 min, then 30%
    of its first tokens over 0.5 s (a 30x burn) until 60m."""
    coarse = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 1.0, 2.5, 5.0, 7.5, 10.0)
    slow = (30 * MINUTE, 60 * MINUTE)
    model = Model(
        "gemma",
        ttft=lambda t: Latency(0.395) if slow[0] <= t < slow[1] else Latency(0.08),
        ttft_buckets=coarse,
    )
    pods = (pod("gemma-0", "gemma", 1, 0), pod("gemma-1", "gemma", 2, 0))
    fleet = Fleet(
        "no-bound-bucket", "gemma's TTFT buckets skip 0.5 s; a 30x burn 30-60m", 75, nodes(2), (model,), pods
    )
    burn = FleetIncident(
        "gemma's TTFT budget burns 30x",
        latency_burn("gemma", "ttft"),
        ("ServescopeTtftSloBurnFast",),
        ("ServescopeTtftSloBurnSlow", "ServescopeTtftP99High"),
        (("model_name", "gemma"),),
    )
    missing = FleetIncident(
        "gemma's histograms lack the bound",
        during(0),
        ("ServescopeSloBucketMissing",),
        (),
        (("model_name", "gemma"),),
    )
    return FleetPlan(fleet, (burn, missing))


def e2e_burn() -> FleetPlan:
    """mistral's decode slows from 20m to 50m (its first tokens stay fast): answers take 50 s at the
    median, a third of them over the 60 s end-to-end bound (a 34x burn)."""
    slow = (20 * MINUTE, 50 * MINUTE)
    model = Model("mistral", e2e=lambda t: Latency(50.0) if slow[0] <= t < slow[1] else Latency(4.0))
    pods = (pod("mistral-0", "mistral", 1, 0), pod("mistral-1", "mistral", 2, 0))
    fleet = Fleet(
        "e2e-burn",
        "mistral's decode slows 20-50m: a third of answers over 60 s",
        70,
        nodes(2),
        (model,),
        pods,
    )
    burn = FleetIncident(
        "mistral's e2e budget burns 34x",
        latency_burn("mistral", "e2e"),
        ("ServescopeE2eSloBurnFast",),
        ("ServescopeE2eSloBurnSlow",),
        (("model_name", "mistral"),),
    )
    return FleetPlan(fleet, (burn,))
