"""promtool case of the leak verdict on `make demo`'s tour as the simulator plays it: no leak ticket while
the loads move and nothing leaks; from the leak's start, a ticket on the leaking GPU alone, before its OOM.

The ground truth is the simulator itself: the tour at the demo pace on `make demo`'s node (8 simulated
H200s, 4 engines of 2 GPUs, seed 1), read every 5 s as Prometheus scrapes the exporter (NVML's memory and
utilisation, DCGM's SM activity) from its first scrape, a few seconds after the node started, with the
rules at the demo profile evaluated every 5 s as the demo's Prometheus does. Nothing leaks before 13:00,
but loads move: KV pressure saturates GPUs 0-1 from 1:00 to 5:00 (busy share 0.6 -> 0.95, memory 2.1 GiB
up with the activations, and back), and engine 2 is down from 9:00 to 13:00 (GPUs 4-5 idle, 3.6 GiB
down, then up again). From 13:00 GPU 6 leaks 2 GiB/min until its engine dies of OOM, about 8 minutes
later. A verdict that trusts a fit of the first minutes (one 5-minute sample, so `k` = 0) reads the
memory that follows the KV step as a leak and raises tickets on GPUs 0 and 1 2.5 minutes into the
episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.quality.rule_engine import series
from servescope.bundle.alerts.bundle import dump, rule_file
from servescope.bundle.alerts.profiles import with_profile
from servescope.core.config import AlertsConfig
from servescope_sim.engines import gpu_groups
from servescope_sim.fault_scenarios import Tour, tour
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.scenarios import PACES
from tests.alerts.promtool import TARGET, case, never, run_promtool

LEAK = "ServescopeGpuMemoryLeakSuspected"
GPUS, ENGINES, SEED = 8, 4, 1  # `servescope demo`'s defaults
SCRAPE_S = 5  # the demo's scrape and evaluation interval
FIRST_SCRAPE_S = 5  # Prometheus starts after the simulated node
MINUTES = 22  # to the leak's OOM and past it; the last GPU is lost at 23:00
TICKET_WITHIN_S = 300  # the leak's ticket fires within 5 minutes of its start


def demo_tour() -> Tour:
    pace = PACES["demo"]
    return tour(pace, gpu_groups(GPUS, ENGINES), pace.leak_mib_per_minute)


def scraped(plan: Tour) -> tuple[list[dict[str, Any]], SimulatedFleet]:
    """Each GPU's series as Prometheus scrapes them every 5 s for MINUTES minutes while `plan` plays (a
    lost GPU's stop), and the fleet at the end."""
    now = [0.0]
    fleet = SimulatedFleet(GPUS, seed=SEED, clock=lambda: now[0])
    samples: dict[tuple[str, int], list[float | None]] = {}
    for second in range(MINUTES * 60 + 1):
        now[0] = float(second)
        fleet.advance()
        plan.apply(fleet, fleet.elapsed)  # what the demo's scenario driver does every second
        if second % SCRAPE_S:
            continue
        for gpu in fleet.gpus:
            up = second >= FIRST_SCRAPE_S and not gpu.lost
            for name, value in (
                ("servescope_gpu_memory_used_bytes", float(gpu.used_bytes)),
                ("servescope_gpu_utilization_ratio", round(gpu.utilization * 100) / 100),  # whole percent
                ("servescope_dcgm_sm_active_ratio", round(gpu.utilization * 0.9, 3)),  # the fake dcgmi's
            ):
                samples.setdefault((name, gpu.index), []).append(value if up else None)
    inputs = [
        series(name, {**TARGET, "gpu": str(i), "uuid": fleet.gpus[i].uuid, "hostname": "node-a"}, values)
        for (name, i), values in samples.items()
    ]
    return inputs, fleet


def tour_case(plan: Tour, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """No leak ticket, not even pending, before the leak starts nor on any other GPU; the leaking GPU's
    ticket firing within TICKET_WITHIN_S of its start."""
    assert plan.leak is not None
    start, gpu = int(plan.leak.window.start), plan.leak.gpu
    return case(
        f"{LEAK}: the demo's tour, KV pressure and an engine down before a 2 GiB/min leak (demo profile)",
        inputs,
        interval=f"{SCRAPE_S}s",
        exprs=[
            never(LEAK, f"{start}s", f"{start}s"),
            {
                "expr": f'count by (gpu) (ALERTS{{alertname="{LEAK}", alertstate="firing"}})',
                "eval_time": f"{start + TICKET_WITHIN_S}s",
                "exp_samples": [{"labels": f'{{gpu="{gpu}"}}', "value": 1}],
            },
            never(LEAK, f"{MINUTES}m", f"{MINUTES}m", f', gpu!="{gpu}"'),
        ],
    )


@pytest.mark.e2e
def test_the_demo_tour_raises_one_leak_ticket_on_the_leaking_gpu_before_its_oom(tmp_path: Path) -> None:
    plan = demo_tour()
    assert plan.kv is not None and plan.leak is not None
    assert plan.kv.window.end <= plan.leak.window.start  # the KV-pressure episode is over before the leak
    inputs, fleet = scraped(plan)
    oom_at = fleet.gpus[plan.leak.gpu].oom_at
    # The ticket's deadline is before the OOM, which comes within the run.
    assert oom_at is not None and plan.leak.window.start + TICKET_WITHIN_S < oom_at < MINUTES * 60
    rules = tmp_path / "demo_rules.yaml"
    rules.write_text(dump(rule_file(with_profile(AlertsConfig(), "demo"))))
    run_promtool([tour_case(plan, inputs)], tmp_path, evaluation_interval=f"{SCRAPE_S}s", rules=rules)
    print(f"GPU {plan.leak.gpu}: leak from {plan.leak.window.start:.0f} s, OOM at {oom_at:.0f} s")
