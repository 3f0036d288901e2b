"""promtool cases of the serving alerts (group servescope-serving) and the KV baseline records.

Two evaluation intervals: the alerts on raw series run at 1m (`CASES_1M`); the KV daily baseline needs a
day of history, so its records and the anomaly alert run at 5m (`CASES_5M`), input samples every 5m too.

Prometheus 2.42 (the promtool here) selects range windows closed at both ends, [t - 5m, t]: with samples
every 5m, avg_over_time(x[5m]) at t averages x(t - 5m) and x(t); the first evaluation (t = 0) sees x(0) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import ENGINE, GPU, TARGET, case, check, firing, run_promtool, series

UTIL = "servescope_gpu_utilization_ratio"
KV = "servescope_serving_kv_cache_usage_ratio"
WAITING = "servescope_serving_requests_waiting"
RUNNING = "servescope_serving_requests_running"
PREEMPTIONS = "servescope_serving_preemptions_total"
INFO = "servescope_engine_gpu_info"
GPU_INFO = "servescope_gpu_info"
STEPS = "servescope_serving_iteration_tokens_count"

# Two GPUs on node-a, two engines of the same model: engine 0 (A) on GPU 0 with two worker PIDs,
# engine 1 (B) on GPU 1.
GPU0 = GPU
GPU1 = {**TARGET, "gpu": "1", "uuid": "GPU-0001", "hostname": "node-a"}
GPU0_BY = {k: v for k, v in GPU0.items() if k != "job"}  # what `max by (instance, hostname, gpu, uuid)` keeps
ENGINE_A = ENGINE
ENGINE_B = {**TARGET, "model_name": "deepseek", "engine": "1", "endpoint": "http://10.0.0.1:8001/metrics"}
ENGINE_C = {**TARGET, "model_name": "deepseek", "engine": "2", "endpoint": "http://10.0.0.1:8002/metrics"}
ON_A = "deepseek engine 0 at http://10.0.0.1:8000/metrics"
ON_B = "deepseek engine 1 at http://10.0.0.1:8001/metrics"


def engine_on_gpu(engine: dict[str, str], gpu: dict[str, str]) -> dict[str, str]:
    """Labels of an alert on an engine spread onto one of its GPUs (job and pid folded away, the GPU's
    hostname joined on)."""
    keys = {k: engine[k] for k in ("instance", "model_name", "engine", "endpoint")}
    return {**keys, "hostname": gpu["hostname"], "gpu": gpu["gpu"], "uuid": gpu["uuid"]}


def engine_page(engine: dict[str, str], hostname: str = "node-a") -> dict[str, str]:
    """Labels of the per-engine page: the engine's keys and its node, no GPU (job and pid folded away)."""
    return {**{k: engine[k] for k in ("instance", "model_name", "engine", "endpoint")}, "hostname": hostname}


def gpu_facts(gpu: dict[str, str], minutes: int = 40, values: str = "") -> dict[str, str]:
    """servescope_gpu_info of a GPU: where the engine alerts find its hostname."""
    facts = {"gpu_model": "H100", "pci_bus_id": f"0000:1{gpu['gpu']}:00.0", "driver_version": "550"}
    return series(GPU_INFO, {**gpu, **facts, "mig_mode": "0"}, values or f"1x{minutes}")


def stepping(engine: dict[str, str], minutes: int = 40) -> dict[str, str]:
    """The engine's step counter growing: it is running (vLLM's gauges refresh on steps only)."""
    return series(STEPS, engine, f"0+10x{minutes}")


def gpu_info(engine: dict[str, str], gpu: dict[str, str], pid: str, values: str) -> dict[str, str]:
    """servescope_engine_gpu_info of one engine process on one GPU (the exporter's labels, value 1)."""
    return series(INFO, {**engine, "uuid": gpu["uuid"], "gpu": gpu["gpu"], "pid": pid}, values)


PLACEMENT = [
    gpu_info(ENGINE_A, GPU0, "4101", "1x40"),
    gpu_info(ENGINE_A, GPU0, "4177", "1x40"),  # a second worker of engine A on the same GPU
    gpu_info(ENGINE_B, GPU1, "5203", "1x40"),
    gpu_facts(GPU0),
    gpu_facts(GPU1),
    stepping(ENGINE_A),
    stepping(ENGINE_B),
]

# --- ServescopeGpuSaturated (10m average > 85% for 10m) -------------------------------------------------
SATURATED = "ServescopeGpuSaturated"


def saturated_description(pct: str) -> str:
    return (
        f"node-a GPU {{gpu}} ({{uuid}}) has been busy {pct} on average over 10m (DCGM SM activity where "
        "reported, else NVML utilisation): shed or queue load by priority now, add workers (3-5 min)."
    )


SATURATED_95 = saturated_description("95%").format(gpu="0", uuid="GPU-0000")
SATURATED_CASE = case(
    SATURATED,
    [
        # GPU 0: 50% until minute 4, 95% from minute 5 to 29, 30% from minute 30. The 10m average (11
        # samples) is over 85% from 13m ((2 x 0.5 + 9 x 0.95) / 11 = 86.8%) to 30m (10 x 0.95 + 0.3).
        series(UTIL, GPU0, "0.5x4 0.95x24 0.3x10"),
        # GPU 1 sits exactly on the threshold: `> 0.85` never holds.
        series(UTIL, GPU1, "0.85x40"),
    ],
    check(SATURATED, "22m"),  # over since 13m: pending for 9m
    check(SATURATED, "23m", firing(SATURATED, GPU0_BY, SATURATED_95)),
    check(SATURATED, "32m"),  # the average fell under 85% at 31m
)
# One 80% reading every 9 minutes used to reset `for` on the raw gauge; the average stays at ~93.6%.
# And where DCGM reports SM activity, it decides: GPU 1's NVML reads 99% while its SMs are 50% active.
DIPS = " ".join("0.8" if minute % 9 == 8 else "0.95" for minute in range(41))
DIPS_DESCRIPTION = saturated_description("93.64%").format(gpu="0", uuid="GPU-0000")
SATURATED_DIPS = case(
    f"{SATURATED}: dips and SM activity",
    [
        series(UTIL, GPU0, DIPS),
        series(UTIL, GPU1, "0.99x40"),
        series("servescope_dcgm_sm_active_ratio", GPU1, "0.5x40"),
    ],
    check(SATURATED, "9m"),  # true from 0m: pending
    # (10 x 0.95 + 0.8) / 11 = 93.64% over each 10m window with one dip
    check(SATURATED, "30m", firing(SATURATED, GPU0_BY, DIPS_DESCRIPTION)),
    check(SATURATED, "40m", firing(SATURATED, GPU0_BY, DIPS_DESCRIPTION)),
)

# --- ServescopeKvCachePressure (> 70% for 5m) -----------------------------------------------------------
KV_PRESSURE = "ServescopeKvCachePressure"
KV_PRESSURE_TAIL = " while running: start OOM prevention (shorter max sequence length, more GPU memory)."
KV_PRESSURE_CASE = case(
    KV_PRESSURE,
    [
        # Engine A: 50%, then 80% from minute 5 to 14, 60% from minute 15.
        series(KV, ENGINE_A, "0.5x4 0.8x9 0.6x10"),
        # Engine B exactly on the threshold: silent.
        series(KV, ENGINE_B, "0.7x25"),
        stepping(ENGINE_A, 25),
        stepping(ENGINE_B, 25),
        # Engine C holds 90% after its requests were aborted, idle (no step): vLLM's gauges froze.
        series(KV, ENGINE_C, "0.9x25"),
        series(STEPS, ENGINE_C, "500x25"),
    ],
    check(KV_PRESSURE, "9m"),  # pending for 4m
    check(
        KV_PRESSURE,
        "10m",
        firing(KV_PRESSURE, ENGINE_A, f"{ON_A} uses 80% of its KV cache{KV_PRESSURE_TAIL}"),
    ),
    check(KV_PRESSURE, "16m"),  # 60% since 15m
)

# --- ServescopeGpuSaturatedKvPressure (both on the same GPU, for 5m) -----------------------------------
COMBINED = "ServescopeGpuSaturatedKvPressure"
COMBINED_A_GPU0 = (
    f"{ON_A} uses 90% of its KV cache while its GPU 0 on node-a (GPU-0000) is compute-saturated: no "
    "request suffers yet; shed or queue load by priority before latency breaks."
)
HURTING = "ServescopeKvPressureHurtingRequests"
HURTING_A = (
    f"{ON_A} uses 90% of its KV cache while GPUs it runs on node-a are compute-saturated, and requests "
    "wait, are preempted or miss the TTFT objective: shed load now."
)
# GPU 0 saturated throughout; engine A (on GPU 0) at 90% KV from minute 5 to 14, engine B (GPU 1) at 50%.
ONE_GPU = [
    series(UTIL, GPU0, "0.95x30"),
    series(UTIL, GPU1, "0.4x30"),
    series(KV, ENGINE_A, "0.5x4 0.9x9 0.5x10"),
    series(KV, ENGINE_B, "0.5x30"),
    *PLACEMENT,
]
COMBINED_CASES = [
    {
        # GPU 0 saturated (engine A's GPU) while the KV pressure is on engine B (GPU 1): each single alert
        # fires, the combined one stays silent.
        "name": f"{COMBINED} on different GPUs",
        "interval": "1m",
        "input_series": [
            series(UTIL, GPU0, "0.95x30"),
            series(UTIL, GPU1, "0.4x30"),
            series(KV, ENGINE_A, "0.5x30"),
            series(KV, ENGINE_B, "0.9x30"),
            *PLACEMENT,
        ],
        "alert_rule_test": [
            check(COMBINED, "10m"),
            check(COMBINED, "20m"),
            check(SATURATED, "20m", firing(SATURATED, GPU0_BY, SATURATED_95)),
            check(
                KV_PRESSURE,
                "20m",
                firing(KV_PRESSURE, ENGINE_B, f"{ON_B} uses 90% of its KV cache{KV_PRESSURE_TAIL}"),
            ),
        ],
    },
    {
        # GPU 0 saturated throughout; engine A (on GPU 0, two PIDs) at 90% KV from minute 5 to 14.
        # One alert (the PIDs fold), labelled with engine A and GPU 0; nothing for engine B.
        "name": f"{COMBINED} on one GPU",
        "interval": "1m",
        "input_series": ONE_GPU,
        "alert_rule_test": [
            check(COMBINED, "9m"),  # both hold since 5m: pending for 4m
            check(COMBINED, "10m", firing(COMBINED, engine_on_gpu(ENGINE_A, GPU0), COMBINED_A_GPU0)),
            check(COMBINED, "16m"),  # KV back to 50% at 15m
            check(HURTING, "10m"),  # nothing waits, nothing is preempted: not a page
        ],
    },
    {
        # The same, and requests wait on engine A from minute 3: waiting throughout 5 minutes from 8m (a
        # symptom), with KV pressure from 5m: the page. Engine B, whose requests wait too, has neither KV
        # pressure nor a saturated GPU.
        "name": f"{HURTING}: KV pressure with a symptom",
        "interval": "1m",
        "input_series": [
            *ONE_GPU,
            series(WAITING, ENGINE_A, "0x2 3x27"),
            series(WAITING, ENGINE_B, "4x30"),
        ],
        "alert_rule_test": [
            check(HURTING, "12m"),  # both hold since 8m: pending for 4m
            check(HURTING, "13m", firing(HURTING, engine_page(ENGINE_A), HURTING_A)),
            check(HURTING, "16m"),
        ],
    },
    {
        # An idle engine whose KV gauge froze at 90% (no step since) on a saturated GPU: no alert.
        "name": f"{COMBINED}: idle engine with a frozen KV gauge",
        "interval": "1m",
        "input_series": [
            series(UTIL, GPU0, "0.95x30"),
            series(KV, ENGINE_A, "0.9x30"),
            series(STEPS, ENGINE_A, "700x30"),
            *PLACEMENT[:3],
            gpu_facts(GPU0),
        ],
        "alert_rule_test": [check(COMBINED, "10m"), check(COMBINED, "20m"), check(KV_PRESSURE, "20m")],
    },
]

# --- ServescopeRequestQueueBuilding (> 5 waiting and more waiting than running, for 10m) -----------------
QUEUE = "ServescopeRequestQueueBuilding"
QUEUE_CASE = case(
    QUEUE,
    [
        # Engine A: 12 waiting for 8 running from minute 5 to 19, 3 waiting from minute 20.
        series(WAITING, ENGINE_A, "2x4 12x14 3x10"),
        series(RUNNING, ENGINE_A, "8x30"),
        # Engine B: 12 waiting but 16 running: the batch keeps up, silent.
        series(WAITING, ENGINE_B, "12x30"),
        series(RUNNING, ENGINE_B, "16x30"),
    ],
    check(QUEUE, "14m"),  # pending for 9m
    check(
        QUEUE,
        "15m",
        firing(QUEUE, ENGINE_A, f"{ON_A} has 12 requests waiting, more than 1 per running request."),
    ),
    check(QUEUE, "21m"),
)

# --- ServescopePreemptionsSustained (rate[5m] > 0.1/s for 15m) -----------------------------------------
PREEMPT = "ServescopePreemptionsSustained"
PREEMPT_CASE = case(
    PREEMPT,
    [
        # Engine A: 0 until minute 5, then +60 a minute (1/s) from minute 6 to 25 (60 ... 1200), flat after.
        # rate at 6m = (60 - 0) / 300 s = 0.2 > 0.1: pending from 6m, firing from 21m.
        # The last increase is at 25m; the window [t-5m, t] holds it until 29m: rate 0 from 30m.
        series(PREEMPTIONS, ENGINE_A, "0x5 60+60x19 1200x15"),
        # Engine B: +3 a minute = 0.05/s, under the threshold.
        series(PREEMPTIONS, ENGINE_B, "0+3x40"),
    ],
    check(PREEMPT, "20m"),  # pending for 14m
    # rate at 21m: (960 - 660) / 300 s = 1.00/s
    check(
        PREEMPT,
        "21m",
        firing(
            PREEMPT,
            ENGINE_A,
            f"{ON_A} preempts 1.00 requests/s: the KV cache is too small for the batch.",
        ),
    ),
    check(PREEMPT, "31m"),
)

# --- ServescopeGpuUnderutilisedWhileQueued (waiting > 0 while its GPU < 50% busy, for 10m) -------------
UNDER = "ServescopeGpuUnderutilisedWhileQueued"
UNDER_CASE = case(
    UNDER,
    [
        series(UTIL, GPU0, "0.3x30"),
        series(UTIL, GPU1, "0.9x30"),
        # Engine A (GPU 0 at 30%): 7 waiting from minute 5 to 19. One alert although it has two PIDs.
        series(WAITING, ENGINE_A, "0x4 7x14 0x10"),
        # Engine B also has requests waiting, but its GPU 1 is 90% busy: silent.
        series(WAITING, ENGINE_B, "7x30"),
        *PLACEMENT,
    ],
    check(UNDER, "14m"),  # pending for 9m
    check(
        UNDER,
        "15m",
        firing(
            UNDER,
            engine_on_gpu(ENGINE_A, GPU0),
            f"{ON_A} has 7 requests waiting while GPU 0 is under 50% busy: raise max_num_seqs "
            "(see servescope_serving_recommended_max_num_seqs).",
        ),
    ),
    check(UNDER, "21m"),
)

# --- ServescopeFleetCapacityBufferLow (per model pool: 1 - avg(busy) of its engines' GPUs < 20%, 15m) ---
FLEET = "ServescopeFleetCapacityBufferLow"
NODE_B = {"job": "servescope", "instance": "node-b:9108", "hostname": "node-b"}
FLEET_GPUS = [
    GPU0,
    GPU1,
    {**NODE_B, "gpu": "0", "uuid": "GPU-0100"},
    {**NODE_B, "gpu": "1", "uuid": "GPU-0101"},
]
IDLE_GPU = {**NODE_B, "gpu": "2", "uuid": "GPU-0102"}  # no engine runs on it
LLAMA_GPU = {**NODE_B, "gpu": "3", "uuid": "GPU-0103"}
LLAMA = {
    **{k: NODE_B[k] for k in ("job", "instance")},
    "model_name": "llama",
    "engine": "0",
    "endpoint": "http://10.0.0.9:8000/metrics",
}


def _deepseek_pool(minutes: int = 45) -> list[dict[str, str]]:
    """servescope_engine_gpu_info of deepseek's four engines, one on each FLEET_GPUS GPU."""
    return [
        gpu_info(
            {
                "job": gpu["job"],
                "instance": gpu["instance"],
                "model_name": "deepseek",
                "engine": str(i),
                "endpoint": f"http://10.0.1.{i}:8000/metrics",
            },
            gpu,
            "4101",
            f"1x{minutes}",
        )
        for i, gpu in enumerate(FLEET_GPUS)
    ]


FLEET_CASES = [
    {
        # deepseek's four GPUs at 50%, then 90/95/80/85% from minute 5 to 33 (average 87.5%: 12.5% spare),
        # then 50% again. Over the 5m averages (6 samples) the pool is under 20% spare from 9m ((5 x 0.875 +
        # 0.5) / 6 = 81.25% busy) to 34m. An idle GPU with no engine and llama's GPU at 30% do not count in
        # deepseek's pool (over all six GPUs the mean would be 64%, 36% spare: silent); llama's pool is 70%
        # spare.
        "name": f"{FLEET} busy pool",
        "interval": "1m",
        "input_series": [
            *(
                series(UTIL, gpu, f"0.5x4 {busy}x29 0.5x10")
                for gpu, busy in zip(FLEET_GPUS, ("0.9", "0.95", "0.8", "0.85"), strict=True)
            ),
            series(UTIL, IDLE_GPU, "0x45"),
            series(UTIL, LLAMA_GPU, "0.3x45"),
            *_deepseek_pool(),
            gpu_info(LLAMA, LLAMA_GPU, "7001", "1x45"),
        ],
        "alert_rule_test": [
            check(FLEET, "23m"),  # pending for 14m
            check(
                FLEET,
                "24m",
                firing(
                    FLEET,
                    {"model_name": "deepseek"},
                    "Only 12.5% of the GPU time of deepseek's engines is spare (the buffer is 20%): add "
                    "workers before the next burst.",
                ),
            ),
            check(FLEET, "36m"),  # the averages fell back at 35m
        ],
    },
    {
        # One GPU fully busy among idle ones: average (1 + 0.3 + 0.3 + 0.3) / 4 = 47.5%, 52.5% spare.
        "name": f"{FLEET} one busy GPU",
        "interval": "1m",
        "input_series": [
            *(
                series(UTIL, gpu, values)
                for gpu, values in zip(FLEET_GPUS, ("1x30", "0.3x30", "0.3x30", "0.3x30"), strict=True)
            ),
            *_deepseek_pool(30),
        ],
        "alert_rule_test": [check(FLEET, "20m"), check(FLEET, "30m")],
    },
    {
        # Every decoding engine reads ~100% in NVML; DCGM's SM activity says half of each GPU works: 50%
        # spare, silent (on NVML utilisation alone the pool would read 0% spare and fire).
        "name": f"{FLEET} SM activity where DCGM reports it",
        "interval": "1m",
        "input_series": [
            *(series(UTIL, gpu, "1x30") for gpu in FLEET_GPUS),
            *(series("servescope_dcgm_sm_active_ratio", gpu, "0.5x30") for gpu in FLEET_GPUS),
            *_deepseek_pool(30),
        ],
        "alert_rule_test": [check(FLEET, "20m"), check(FLEET, "30m")],
    },
]

CASES_1M: list[dict[str, Any]] = [
    SATURATED_CASE,
    SATURATED_DIPS,
    KV_PRESSURE_CASE,
    *COMBINED_CASES,
    QUEUE_CASE,
    PREEMPT_CASE,
    UNDER_CASE,
    *FLEET_CASES,
]

# --- KV daily baseline (evaluated every 5m, samples every 5m; one day-long test group for speed) ---------
AVG5M = "engine:servescope_kv_cache_usage:avg5m"
AVG1D = "engine:servescope_kv_cache_usage:avg1d"
STDDEV1D = "engine:servescope_kv_cache_usage:stddev1d"
# Engine C carries the exact checks of the recording rules.
# The baseline is kept by node (hostname), not by `instance` (the exporter pod's address changes at every
# rollout).
BASELINE_LABELS = {**{k: v for k, v in ENGINE_C.items() if k != "instance"}, "hostname": "node-a"}
C_LABELS = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(BASELINE_LABELS.items())) + "}"


def record(name: str, eval_time: str, value: float) -> dict[str, Any]:
    """The record `name` of engine C at `eval_time` (a recorded series keeps its name)."""
    return {
        "expr": f'{name}{{engine="2"}}',
        "eval_time": eval_time,
        "exp_samples": [{"labels": name + C_LABELS, "value": value}],
    }


# Engine C: kv(0) = 0.25, kv(5m) = 0.25, kv(10m) = 0.75, kv(15m) = 0.25, then 0.75 from 20m on.
RECORDS = [
    # avg5m(10m) = (kv(5m) + kv(10m)) / 2 = (0.25 + 0.75) / 2 = 0.5
    record(AVG5M, "10m", 0.5),
    # avg5m(15m) = (kv(10m) + kv(15m)) / 2 = (0.75 + 0.25) / 2 = 0.5
    record(AVG5M, "15m", 0.5),
    # avg5m so far: 0m 0.25 (kv(0) alone), 5m 0.25, 10m 0.5, 15m 0.5.
    # avg1d(15m) = (0.25 + 0.25 + 0.5 + 0.5) / 4 = 1.5 / 4 = 0.375
    record(AVG1D, "15m", 0.375),
    # deviations from 0.375: -0.125, -0.125, +0.125, +0.125; variance = 4 x 0.125^2 / 4 = 0.015625;
    # stddev1d(15m) = sqrt(0.015625) = 0.125
    record(STDDEV1D, "15m", 0.125),
    # avg5m(20m) = (0.25 + 0.75) / 2 = 0.5, then 0.75 from 25m on. At 24h25m the 1d window
    # [0h25m, 24h25m] holds 0.75 only: avg1d = 0.75, stddev1d = 0 (the early samples have left it).
    record(AVG1D, "24h25m", 0.75),
    record(STDDEV1D, "24h25m", 0.0),
]

# --- ServescopeKvCacheAnomaly (|avg5m - avg1d| / max(stddev1d, 0.02) > 3 for 15m) ----------------------
# Baseline day of engines A and B: 30% from 0h00 to 11h55 (144 samples), 50% from 12h00 to 23h55 (144).
# avg5m: 144 x 0.3 (0h00-11h55), 0.4 (12h00), 143 x 0.5 (12h05-23h55). Over a day: mean ~0.40, stddev ~0.10.
#
# Engine A jumps to 81% from 24h00 to 24h55 (12 samples), then 50% again. avg5m(24h00) = (0.5 + 0.81) / 2
# = 0.655, then 0.81. At 24h30 the 1d window [0h30, 24h30] holds 289 samples: 138 x 0.3, 0.4, 143 x 0.5,
# 0.655, 6 x 0.81. Sum = 41.4 + 0.4 + 71.5 + 0.655 + 4.86 = 118.815, mean = 118.815 / 289 = 0.411125;
# sum of squares = 12.42 + 0.16 + 35.75 + 0.429025 + 3.9366 = 52.695625,
# variance = 52.695625 / 289 - 0.411125^2 = 0.0133144, stddev = 0.115388;
# z = (0.81 - 0.411125) / 0.115388 = 3.457.
#   z by evaluation: 24h00 2.53, 24h05 3.94, 24h10 3.83, 24h15 3.73, 24h20 3.63, 24h25 3.54, 24h30 3.46,
#   ... 24h55 3.11, 25h00 1.85 (avg5m 0.655), then ~0.6.
# promtool evaluates the rule groups in no fixed order: when servescope-serving runs before
# servescope-kv-baseline, the alert reads the records of the previous evaluation (5m late). So: pending
# from 24h05 (or 24h10), firing from 24h20 (or 24h25); at 24h30 the value is z(24h30) = 3.46 or
# z(24h25) = 3.54, both "3.5"; resolved at 25h00 (or 25h05).
# Engine B stays in its band (50%, 30%, 45%): z <= 1.05; every check below lists engine A only, so
# engine B is asserted silent at each of them.
# Both are silent at 12h30: without a 23h-old baseline the switch to 50% at 12h would read as an
# anomaly (z ~ 4.8 at 12h30 against a half-day baseline of 30%).
# Engine D drops to 5% after the same baseline day (a restart, a quiet night): no alert, a drop harms
# nobody. Engine E is engine A's twin whose exporter was rolled out at 12h (a new pod address, so a new
# `instance`): its baseline carries on and it fires with engine A.
ANOMALY = "ServescopeKvCacheAnomaly"
BASELINE_DAY = "0.3x143 0.5x143"
ENGINE_D = {**TARGET, "model_name": "deepseek", "engine": "3", "endpoint": "http://10.0.0.1:8003/metrics"}
ENGINE_E = {**TARGET, "model_name": "qwen", "engine": "0", "endpoint": "http://10.0.0.5:8000/metrics"}
ROLLED_OUT = {**ENGINE_E, "instance": "10.0.7.3:9108"}


def anomaly(engine: dict[str, str], on: str) -> dict[str, Any]:
    labels = {**{k: v for k, v in engine.items() if k != "instance"}, "hostname": "node-a"}
    return firing(
        ANOMALY, labels, f"{on}: KV usage is 3.5 daily standard deviations above its mean of the last day."
    )


ANOMALY_CASE = {
    "name": f"{ANOMALY} and the KV baseline records",
    "interval": "5m",
    "input_series": [
        series(KV, ENGINE_A, f"{BASELINE_DAY} 0.81x11 0.5x11"),
        series(KV, ENGINE_B, f"{BASELINE_DAY} 0.5x5 0.3x5 0.45x11"),
        series(KV, ENGINE_C, "0.25 0.25 0.75 0.25 0.75x300"),
        series(KV, ENGINE_D, f"{BASELINE_DAY} 0.05x22"),
        series(KV, ENGINE_E, "0.3x143 stale"),
        series(KV, ROLLED_OUT, "_x144 0.5x143 0.81x11 0.5x11"),
        # The node's GPU info, from the exporter before the rollout and after it.
        gpu_facts(GPU0, 310),
        gpu_facts({**GPU0, "instance": ROLLED_OUT["instance"]}, values="_x144 1x166"),
    ],
    "alert_rule_test": [
        check(ANOMALY, "12h30m"),  # a half-day baseline: no verdict yet
        check(ANOMALY, "24h15m"),  # anomalous since 24h05 (or 24h10): pending
        check(
            ANOMALY,
            "24h30m",
            anomaly(ENGINE_A, ON_A),
            anomaly(ENGINE_E, "qwen engine 0 at http://10.0.0.5:8000/metrics"),
        ),
        check(ANOMALY, "25h10m"),  # back to 50%
    ],
    "promql_expr_test": RECORDS,
}

CASES_5M: list[dict[str, Any]] = [ANOMALY_CASE]
CASES: list[dict[str, Any]] = [*CASES_1M, *CASES_5M]


@pytest.mark.e2e
def test_serving_alerts(tmp_path: Path) -> None:
    run_promtool(CASES_1M, tmp_path)


@pytest.mark.e2e
def test_kv_baseline(tmp_path: Path) -> None:
    run_promtool(CASES_5M, tmp_path, evaluation_interval="5m")
