"""The load client's claims that need free cores, against the mock engine in its own process.

The tests check what the client does whatever the machine's load (every request sent once and
answered, tokens counted, an overload reported as a backlog, Locust's workers splitting one schedule);
how well it keeps time is measured here:

- below capacity: 15 req/s of 10-token answers into the mock's 4 slots (about 60 req/s), 3 s, one step
  per API and streaming mode: valid at the default rules (schedule lag p99 <= 50 ms, >= 98 % of the
  schedule sent in its window, no growing backlog), the engine's queue, and the client's P99 TTFT
  against the engine histogram's P99 bucket;
- coordinated omission over HTTP: at twice that capacity (120 req/s, 3 s) the open loop's P99 TTFT
  against a closed loop's of 8 clients (120 req/s x 65 ms), which sends only as answers come;
- scale-out: one process's closed-loop ceiling against an instant mock, an open-loop Poisson schedule
  from one process at 1, 1.5 and 2 times it, and from a Locust master and 2 workers at the first rate
  one process could not keep (lag bound 500 ms for both: the master, workers and mock share the cores).

Writes results/load-client.{json,md}. Usage: python bench/load_client.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from servescope.kit.load.calibrate import measure_ceiling
from servescope.kit.load.client import RequestSpec
from servescope.kit.load.engine_metrics import metrics_url
from servescope.kit.load.records import StepResult, achieved_rate
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.scaleout import LocustPlan, run_locust
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.summary import ttft_agreement
from servescope.kit.load.validity import ValidityRules, percentile
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write
from bench.report_sections import table

MODES = (("completions", True), ("chat", True), ("chat", False))
SCALE_OUT_RULES = ValidityRules(max_lag_p99_s=0.5)


def p99_ms(result: StepResult) -> float:
    return (percentile([r.ttft_s for r in result.records if r.ttft_s is not None], 0.99) or 0.0) * 1000


def runner(base: str, *, api: str = "completions", stream: bool = True, **options: Any) -> HttpStepRunner:
    spec = RequestSpec(base, "mock", api=api, stream=stream)  # type: ignore[arg-type]
    return HttpStepRunner(spec, LengthDistribution(16, 10), engine_metrics_url=metrics_url(base), **options)


def below_capacity(base: str, runs: int) -> list[dict[str, Any]]:
    rows = []
    for seed in range(1, runs + 1):
        for api, stream in MODES:
            result = runner(base, api=api, stream=stream).run_step(15.0, 3.0, seed=seed)
            agreement = ttft_agreement(result) if stream else None
            rows.append(
                {
                    "seed": seed,
                    "api": api,
                    "stream": stream,
                    "valid": result.valid,
                    "invalid_reason": result.invalid_reason,
                    "lag_p99_ms": round(result.schedule_lag_p99_s * 1000, 1),
                    "engine_waiting_max": max((s.waiting for s in result.engine_samples), default=None),
                    "client_p99_ms": round(agreement.client_p99_s * 1000, 1) if agreement else None,
                    "engine_bucket_ms": [b * 1000 for b in agreement.bucket] if agreement else None,
                    "agrees": agreement.agrees if agreement else None,
                }
            )
    return rows


def coordinated_omission(base: str, runs: int) -> list[dict[str, Any]]:
    rows = []
    for seed in range(2, runs + 2):
        overloaded = runner(base, rules=ValidityRules(max_lag_p99_s=1.0)).run_step(120.0, 3.0, seed=seed)
        closed = runner(base, mode="closed").run_step(8, 3.0, seed=seed)
        rows.append(
            {
                "seed": seed,
                "open_invalid_reason": overloaded.invalid_reason,
                "open_p99_ms": round(p99_ms(overloaded), 1),
                "closed_p99_ms": round(p99_ms(closed), 1),
                "ratio": round(p99_ms(overloaded) / max(p99_ms(closed), 1e-9), 1),
            }
        )
    return rows


def step_row(result: StepResult, rate: float) -> dict[str, Any]:
    return {
        "rate": rate,
        "achieved": round(achieved_rate(result.records, result.duration_s), 1),
        "valid": result.valid,
        "invalid_reason": result.invalid_reason,
    }


def scale_out() -> dict[str, Any]:
    with mock_process(MockConfig(slots=10_000, ttft_s=0.005, token_s=0.002)) as fast:
        ceiling = measure_ceiling(fast.base_url, 2.0)
        single = HttpStepRunner(
            RequestSpec(fast.base_url, "mock"), LengthDistribution(16, 8), rules=SCALE_OUT_RULES
        )
        alone = []
        for factor in (1.0, 1.5, 2.0):
            rate = round(factor * ceiling)
            alone.append(step_row(single.run_step(rate, 4.0, seed=5), rate))
            if not alone[-1]["valid"]:
                break
        plan = LocustPlan(
            fast.base_url, "mock", rate, 4.0, workers=2, seed=5, workload=LengthDistribution(16, 8)
        )
        locust = step_row(run_locust(plan, SCALE_OUT_RULES), rate)
    return {"ceiling": round(ceiling, 1), "one_process": alone, "locust_2_workers": locust}


def _below_rows(below: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in below:
        bucket = "—" if r["engine_bucket_ms"] is None else "{:g}-{:g}".format(*r["engine_bucket_ms"])
        cells = [r["seed"], r["api"], r["stream"], r["valid"], r["lag_p99_ms"], r["engine_waiting_max"]]
        rows.append([*map(str, cells), str(r["client_p99_ms"] or "—"), bucket])
    return rows


def markdown(data: dict[str, Any]) -> str:
    out = data["scale_out"]
    omission = [
        [
            *(str(r[k]) for k in ("seed", "open_p99_ms", "closed_p99_ms")),
            f"{r['ratio']}x",
            r["open_invalid_reason"] or "valid",
        ]
        for r in data["coordinated_omission"]
    ]
    senders = [*(("one process", r) for r in out["one_process"]), ("Locust + 2", out["locust_2_workers"])]
    scale = [
        [name, str(r["rate"]), str(r["achieved"]), r["invalid_reason"] or "valid"] for name, r in senders
    ]
    below_header = ["seed", "API", "stream", "valid", "lag p99 ms", "engine waiting max"]
    below_header += ["client P99 TTFT ms", "engine P99 bucket ms"]
    load = ", ".join(f"{v:.1f}" for v in data["load_average"])
    lines = [
        "# Load client against the mock engine",
        "",
        f"Load average (1, 5, 15 min) at the start: {load}; on a busy machine the client rightly falls "
        "behind, which is why this is measured here.",
        "",
        "Below capacity: 15 req/s into 4 slots (about 60 req/s), 3 s, default validity rules.",
        "",
        *table(below_header, _below_rows(data["below_capacity"])),
        "",
        "Coordinated omission: 120 req/s open loop against 8 closed-loop clients, 3 s.",
        "",
        *table(
            ["seed", "open loop P99 TTFT ms", "closed loop P99 TTFT ms", "ratio", "open loop verdict"],
            omission,
        ),
        "",
        f"Scale-out: one process's closed-loop ceiling {out['ceiling']} req/s.",
        "",
        *table(["sender", "offered req/s", "achieved req/s", "verdict"], scale),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="seeds of the below-capacity and omission steps")
    args = parser.parse_args()
    load_average = os.getloadavg()
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.005)) as mock:
        below = below_capacity(mock.base_url, args.runs)
        omission = coordinated_omission(mock.base_url, args.runs)
    data: dict[str, object] = {
        "machine": machine(),
        "load_average": [round(v, 2) for v in load_average],
        "below_capacity": below,
        "coordinated_omission": omission,
        "scale_out": scale_out(),
    }
    write("load-client", data, markdown(data))


if __name__ == "__main__":
    main()
