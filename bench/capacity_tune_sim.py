"""Capacity and tuning on the simulated engine: the figures docs/capacity-and-tuning.md quotes.

Knee interval against an exhaustive fine sweep, backlog detection, coordinated omission, the batch
trade-off, and grid against Bayesian and random search over bench/tune-space-sim.yaml at 40 % and 10 %
of the grid's engine starts, 3 seeds each. Writes bench/results/capacity-tune.{json,md}.
Usage: python bench/capacity_tune_sim.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo, summarise
from servescope.kit.load.validity import percentile
from servescope.kit.tune.cli import SimulatedLauncher
from servescope.kit.tune.space import load_space
from servescope.kit.tune.strategies import run_study
from servescope_sim.engine_config import EngineConfig
from servescope_sim.load_runner import SimulatedStepRunner, start_simulated

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write

SLOS = (Slo("ttft", 0.5),)
SPACE = Path(__file__).with_name("tune-space-sim.yaml")
STEP_S = 20.0
# The engine's long-run knee: P99 TTFT pooled over 3 x 30 min of Poisson load per rate.
LONG_RUN_RATES = (11.5, 11.75, 12.0, 12.1, 12.25, 12.5)
LONG_RUN_S, LONG_RUN_SEEDS = 1800.0, 3


def long_run_p99(runner: SimulatedStepRunner, rate: float) -> float:
    """P99 TTFT pooled over LONG_RUN_SEEDS steps of LONG_RUN_S each (a never-answered request is infinite)."""
    ttfts: list[float] = []
    for seed in range(LONG_RUN_SEEDS):
        records = runner.run_step(rate, LONG_RUN_S, seed=100 + seed).records
        ttfts += [r.ttft_s if r.ok and r.ttft_s is not None else math.inf for r in records]
    return percentile(ttfts, 0.99) or math.inf


def knee_vs_sweep() -> dict[str, Any]:
    """The search against the engine's long-run knee, and against short-window sweeps that miss it."""
    runner = SimulatedStepRunner(EngineConfig())
    knee = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=3))
    long_run = {rate: long_run_p99(runner, rate) for rate in LONG_RUN_RATES}
    passing = [rate for rate, p99 in long_run.items() if p99 <= SLOS[0].limit_s]
    truth = (max(passing), min(r for r in LONG_RUN_RATES if r > max(passing)))
    sweeps = {}
    for seed in range(3):
        rate, last = 10.0, 0.0
        while summarise(runner.run_step(rate, STEP_S, seed=seed), SLOS, seed).meets:
            last, rate = rate, rate + 0.25
        sweeps[seed] = last
    return {
        "knee": [knee.estimate, knee.lower, knee.upper],
        "search_steps": len(knee.steps),
        "long_run_p99": long_run,
        "truth": truth,
        "inside": knee.lower <= truth[0] and truth[1] <= knee.upper,
        "sweep_knees": sweeps,
    }


def backlog_and_omission() -> dict[str, Any]:
    overloaded = summarise(SimulatedStepRunner(EngineConfig()).run_step(24, 60, seed=1), SLOS, 1)
    full = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(256, 60, seed=1)
    closed = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(64, 60, seed=1)
    same_rate = SimulatedStepRunner(EngineConfig()).run_step(closed.achieved_rate, 60, seed=1)
    return {
        "open_24": {"backlog": overloaded.reason, "p99_ttft": overloaded.percentiles["p99_ttft"]},
        "closed_256": {
            "rate": full.achieved_rate,
            "p99_ttft": summarise(full, SLOS, 1).percentiles["p99_ttft"],
            "backlog": summarise(full, SLOS, 1).reason,
        },
        "closed_64": {
            "rate": closed.achieved_rate,
            "p99_ttft": summarise(closed, SLOS, 1).percentiles["p99_ttft"],
        },
        "open_same_rate": {"p99_ttft": summarise(same_rate, SLOS, 1).percentiles["p99_ttft"]},
    }


def batch_trade_off() -> dict[str, float]:
    found = {}
    for limit in (1, 8):
        step = SimulatedStepRunner(EngineConfig(max_num_seqs=limit), mode="closed").run_step(
            limit, 120, seed=1
        )
        summary = summarise(step, SLOS, 1)
        found[limit] = (summary.goodput, summary.throughput_tokens, summary.percentiles["p99_tpot"])
    return {
        "qps_ratio": found[8][0] / found[1][0],
        "tokens_ratio": found[8][1] / found[1][1],
        "p99_tpot_increase": found[8][2] / found[1][2] - 1,
    }


def searches(quick: bool) -> dict[str, Any]:
    space = load_space(SPACE)
    launcher = SimulatedLauncher(space.warmup_s, start_simulated)
    grid = run_study(space, launcher, "grid")
    best = max(t.objective for t in grid.trials)
    out: dict[str, Any] = {"grid_trials": len(grid.trials), "grid_best": best, "runs": []}
    for share in (0.4,) if quick else (0.4, 0.1):
        budget = int(share * len(grid.trials))
        for strategy in ("bayes", "random"):
            for seed in range(3):
                study = run_study(space, launcher, strategy, budget=budget, seed=seed)
                found = max(t.objective for t in study.trials)
                out["runs"].append(
                    {"strategy": strategy, "budget": budget, "seed": seed, "share_of_best": found / best}
                )
    return out


def markdown(data: dict[str, Any]) -> str:
    k, b, t = data["knee"], data["backlog"], data["batch"]
    lines = [
        "# Capacity and tuning on the simulated engine",
        "",
        f"- Knee (3 repeats): {k['knee'][0]:.2f} req/s in [{k['knee'][1]:.2f}, {k['knee'][2]:.2f}] "
        f"({k['search_steps']} steps). Long-run P99 TTFT (3 x 30 min per rate): "
        + ", ".join(f"{rate:g}: {p99:.3f} s" for rate, p99 in k["long_run_p99"].items())
        + f"; the knee lies in [{k['truth'][0]:g}, {k['truth'][1]:g}], inside the interval: {k['inside']}. "
        f"0.25 req/s sweeps of {STEP_S:g} s steps per seed stop at {k['sweep_knees']}.",
        f"- Open loop at 24 req/s: {b['open_24']['backlog']}, p99 TTFT {b['open_24']['p99_ttft']:.3g} s.",
        f"- Closed loop, 256 clients: {b['closed_256']['rate']:.2f} req/s, p99 TTFT "
        f"{b['closed_256']['p99_ttft']:.3f} s, backlog {b['closed_256']['backlog']}.",
        f"- Same rate {b['closed_64']['rate']:.2f} req/s: closed loop (64 clients) p99 TTFT "
        f"{b['closed_64']['p99_ttft']:.3f} s, open loop {b['open_same_rate']['p99_ttft']:.3f} s.",
        f"- Batch 1 -> 8: {t['qps_ratio']:.2f}x requests/s, {t['tokens_ratio']:.2f}x tokens/s, "
        f"+{t['p99_tpot_increase']:.0%} p99 TPOT.",
        "",
        f"Search over {data['search']['grid_trials']} configurations, "
        f"grid best {data['search']['grid_best']:.2f} req/s:",
        "",
        "| strategy | engine starts | seed | share of the grid's best |",
        "| --- | --- | --- | --- |",
    ]
    for run in data["search"]["runs"]:
        lines.append(f"| {run['strategy']} | {run['budget']} | {run['seed']} | {run['share_of_best']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="One search budget (40 %) only.")
    args = parser.parse_args()
    data: dict[str, Any] = {"machine": machine()}
    data["knee"] = knee_vs_sweep()
    data["backlog"] = backlog_and_omission()
    data["batch"] = batch_trade_off()
    data["search"] = searches(args.quick)
    write("capacity-tune", data, markdown(data))


if __name__ == "__main__":
    main()
