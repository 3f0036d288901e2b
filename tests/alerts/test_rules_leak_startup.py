"""promtool case of the leak verdict at the demo profile (2-minute growth halves) on a GPU that has no
leak: its memory steps up once at start-up and then stays flat under a flat load.

The ground truth is the simulator's steady GPU as Prometheus scrapes it (every 5 s): 124 GiB held, a
128 MiB allocator sawtooth every 45 s and 8 MiB of noise, a flat busy share of 0.6, and, in the first
10 s, 0.6 GiB less (the activation workspace still settling as the engine takes its load). Memory is
fitted on 10-minute means, so in the first minutes those means cover one to three sawtooth periods and
the start-up sample: the remainder wobbles by 5 to 30 MiB/min from one minute record to the next. With
the production bound (4 MiB/min, i.e. 8 MiB over a 2-minute half) both halves read as growth and the
ticket fires within five minutes of start-up; the demo profile keeps production's margin in bytes per
half (120 MiB) instead.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.quality.rule_engine import values
from servescope.bundle.alerts.bundle import dump, rule_file
from servescope.bundle.alerts.model import BUNDLE_LABEL
from servescope.bundle.alerts.profiles import with_profile
from servescope.core.config import AlertsConfig
from tests.alerts.promtool import GPU, GPU_BY, case, run_promtool, series

LEAK = "ServescopeGpuMemoryLeakSuspected"
GIB, MIB = 1024**3, 1024**2
SCRAPE_S, SAWTOOTH_S = 5, 45
STEP_BYTES = 0.6 * GIB  # the workspace (6 GiB at full load) x the load's last 0.1 of rise at start
MINUTES = 30


def steady_gpu(seed: int = 1, leak_per_minute: float = 0.0) -> list[dict[str, str]]:
    """The steady GPU's memory and utilisation, a sample every 5 s for MINUTES minutes, leaking
    `leak_per_minute` bytes from the start."""
    rng = random.Random(seed)
    memory = []
    for i in range(MINUTES * 60 // SCRAPE_S + 1):
        seconds = i * SCRAPE_S
        sawtooth = 128 * MIB * (seconds % SAWTOOTH_S) / SAWTOOTH_S
        settling = -STEP_BYTES if seconds < 10 else 0.0
        leaked = leak_per_minute * seconds / 60
        memory.append(float(round(124 * GIB + sawtooth + rng.gauss(0, 8 * MIB) + settling + leaked)))
    load = [0.6] * len(memory)
    return [
        series("servescope_gpu_memory_used_bytes", GPU, values(memory)),
        series("servescope_gpu_utilization_ratio", GPU, values(load)),
    ]


STARTUP = case(
    f"{LEAK}: memory steps up once at start-up, then stays flat under a flat load (demo profile)",
    steady_gpu(),
    interval=f"{SCRAPE_S}s",
    exprs=[
        {
            "expr": f'max_over_time(ALERTS{{alertname="{LEAK}"}}[{MINUTES}m])',
            "eval_time": f"{MINUTES}m",
            "exp_samples": [],
        }
    ],
)
# The demo's leak (2 GiB/min from the start, as the memory-leak scenario plays it) on the same GPU: the
# remainder grows about 1 GiB/min while the 10-minute means fill, far over the demo's bound, so the
# ticket is pending at 3 minutes and firing at 4, minutes before the OOM (about 8.4 minutes).
FIRING = (
    "{"
    + ", ".join(
        f'{k}="{v}"'
        for k, v in {
            "__name__": "ALERTS",
            "alertname": LEAK,
            "alertstate": "firing",
            **BUNDLE_LABEL,
            **GPU_BY,
            "severity": "warning",
        }.items()
    )
    + "}"
)
LEAKING = case(
    f"{LEAK}: the demo's 2 GiB/min leak from start-up (demo profile)",
    steady_gpu(leak_per_minute=2 * GIB),
    interval=f"{SCRAPE_S}s",
    exprs=[
        {"expr": f'ALERTS{{alertname="{LEAK}"}}', "eval_time": "2m", "exp_samples": []},
        {
            "expr": f'ALERTS{{alertname="{LEAK}", alertstate="firing"}}',
            "eval_time": "4m",
            "exp_samples": [{"labels": FIRING, "value": 1}],
        },
    ],
)
CASES = [STARTUP, LEAKING]


@pytest.mark.e2e
def test_a_start_up_step_is_no_leak_and_the_demo_leak_is_at_the_demo_profile(tmp_path: Path) -> None:
    rules = tmp_path / "demo_rules.yaml"
    rules.write_text(dump(rule_file(with_profile(AlertsConfig(), "demo"))))
    run_promtool(CASES, tmp_path, evaluation_interval="1m", rules=rules)
