"""Alert quality: precision, recall, pages per incident and leak lead time of the bundle's alert rules.

Two libraries of scenarios, each with its ground-truth incidents. The node library (bench/quality/
library.py) simulates one node through the exporter's own code (exporter topology); the fleet library
(bench/quality/fleet_library.py) models a Kubernetes fleet (planned changes, crash loops, blindness, diurnal
days, causes while the SLO holds, histograms without the bound), played in both topologies. Every run's
series are judged by promtool's rule engine with the rules built for its topology; the pages by a real
Alertmanager loaded with the bundle's configuration. Writes bench/results/alert-quality.{json,md}.
Exit status 0 whether or not a target is met.
Usage: python bench/alert_quality.py [--quick] [--seeds 1 2 3] [--workers 2] [--only NAME ...]
       [--library node|fleet|both]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write
from bench.quality import paging
from bench.quality.evaluate import RunOutcome, score
from bench.quality.fleet_library import PAGES, FleetPlan
from bench.quality.fleet_library import library as fleet_library
from bench.quality.fleet_runs import TOPOLOGIES, FleetSpec, play
from bench.quality.library import library
from bench.quality.node import Timing
from bench.quality.pager import Alertmanager, replay
from bench.quality.report import markdown, to_json
from bench.quality.runs import Generated, RunSpec, generate
from bench.quality.scenarios import Plan
from bench.quality.targets import summary, targets
from servescope.bundle.alerts.bundle import all_alerts, rule_file
from servescope.core.config import AlertsConfig
from servescope_sim.models import MIB

ROOT = Path(__file__).resolve().parents[1]
RULES = ALERTS_BUILD / "rules.yaml"
NAME = "alert-quality"
TIMING = Timing(nvml_interval=5.0, scrape_interval=30.0)
Job = tuple[str, str, int, Path]  # library, plan, seed or topology+seed, work


def _node_run(job: tuple[str, int, Path]) -> Generated:
    """Worker: one node run, simulated and evaluated."""
    plan_name, seed, work = job
    logging.disable(logging.WARNING)  # engines going down on purpose would fill the console
    plan = {p.name: p for p in library()}[plan_name]
    return generate(RunSpec(plan.name, seed), plan, RULES, work, TIMING)


def _fleet_run(job: tuple[str, str, int, Path]) -> tuple[RunOutcome, float]:
    """Worker: one fleet run in one topology, generated and evaluated."""
    plan_name, topology, seed, work = job
    started = time.perf_counter()
    plan = {p.name: p for p in fleet_library()}[plan_name]
    return play(plan, FleetSpec(plan_name, topology, seed), work), time.perf_counter() - started


def simulate(
    nodes: list[Plan], fleets: list[FleetPlan], seeds: list[int], work: Path, workers: int
) -> tuple[list[RunOutcome], int, dict[int, float]]:
    """Every run, longest first on `workers` processes: the outcomes, the samples, the OOMs (node runs)."""
    node_jobs = sorted(
        ((p.name, s, work) for p in nodes for s in seeds), key=lambda j: -_duration(nodes, j[0])
    )
    fleet_jobs = [
        (p.name, t, s, work)
        for p in sorted(fleets, key=lambda p: -p.fleet.duration)
        for t in TOPOLOGIES
        for s in seeds
    ]
    outcomes: list[RunOutcome] = []
    samples = 0
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for generated in pool.imap_unordered(_node_run, node_jobs):
            o = generated.outcome
            run = f"{o.scenario} seed {o.seed}"
            hours, simulated, rules = generated.duration / 3600, generated.simulate_s, generated.evaluate_s
            print(
                f"  {run:<44} simulated {hours:.2f} h in {simulated:5.1f} s, rules in {rules:5.1f} s",
                flush=True,
            )
            outcomes.append(o)
            samples += generated.samples
        for outcome, seconds in pool.imap_unordered(_fleet_run, fleet_jobs):
            run = f"{outcome.scenario} seed {outcome.seed}"
            print(f"  {run:<44} generated and evaluated in {seconds:5.1f} s", flush=True)
            outcomes.append(outcome)
    return sorted(outcomes, key=lambda o: (o.scenario, o.seed)), samples, {}


def _duration(plans: list[Plan], name: str) -> float:
    return next(p.duration for p in plans if p.name == name)


def rules_stale() -> bool:
    committed = yaml.safe_load(RULES.read_text())
    return bool(committed != rule_file(AlertsConfig()))


def promtool_version() -> str:
    done = subprocess.run(["promtool", "--version"], capture_output=True, text=True, check=False)
    words = (done.stdout or done.stderr).split()
    return words[2] if len(words) > 2 else "unknown"


def run(
    nodes: list[Plan], fleets: list[FleetPlan], seeds: list[int], workers: int, work: Path
) -> tuple[dict[str, Any], str]:
    """The whole benchmark in `work`: the results as JSON data and as Markdown."""
    timing: dict[str, float] = {}
    started = mark = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal mark
        timing[phase] = time.perf_counter() - mark
        mark = time.perf_counter()
        print(f"{phase}: {timing[phase]:.1f} s", flush=True)

    print(
        f"{len(nodes)} node scenarios, {len(fleets)} fleet scenarios x {len(TOPOLOGIES)} topologies, "
        f"seeds {seeds}",
        flush=True,
    )
    outcomes, samples, _ = simulate(nodes, fleets, seeds, work, workers)
    lap("simulate + rules")
    severities = {a.name: a.severity for a in all_alerts(AlertsConfig())}
    scores = score(outcomes, severities)
    with Alertmanager(ALERTS_BUILD / "alertmanager.yaml", work) as am:
        paged = [paging.judge(o, replay(am, o), set(PAGES)) for o in outcomes]
    lap("pages")
    leak_rates = {p.name: p.scenario.leak_bytes_per_second * 60 / MIB for p in nodes if p.scenario.leak}
    found = [*targets(scores, leak_rates), *paging.targets(scores, paged, set(PAGES))]
    timing["total"] = time.perf_counter() - started
    meta = _meta(timing, samples, summary(scores, leak_rates))
    plans: list[Any] = [*nodes, *fleets]
    data = to_json(scores, plans, seeds, meta, found) | {"pages": paging.to_json(paged)}
    page = markdown(scores, plans, seeds, meta, found) + "\n" + paging.markdown(paged, scores, set(PAGES))
    return data, page


def _meta(timing: dict[str, float], samples: int, verdict: Any) -> dict[str, Any]:
    """How the results were made: the machine, the time each phase took, the rules, the tools."""
    return {
        "machine": machine(),
        "timing_s": {k: round(v, 2) for k, v in timing.items()},
        "rules": {"file": str(RULES.relative_to(ROOT)), "stale": rules_stale()},
        "promtool": promtool_version(),
        "step_s": TIMING.scrape_interval,
        "scrape_s": TIMING.scrape_interval,
        "nvml_s": TIMING.nvml_interval,
        "samples": samples,
        "summary": verdict,
    }


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seed 1 only, without the slow scenarios")
    parser.add_argument("--seeds", type=int, nargs="+", help="default: 1 2 3 (1 with --quick)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="only these scenarios")
    parser.add_argument("--library", choices=("node", "fleet", "both"), default="both")
    parser.add_argument("--keep", action="store_true", help="keep the promtool inputs")
    parser.add_argument(
        "--results",
        type=Path,
        help="write alert-quality.{json,md} here (default: bench/results; --quick prints only)",
    )
    return parser.parse_args()


def _selected(args: argparse.Namespace) -> tuple[list[Plan], list[FleetPlan], set[str]]:
    """The node and fleet scenarios the arguments ask for, and the names asked for that none has."""
    wanted = set(args.only or ())

    def chosen(name: str, slow: bool, excluded_library: str) -> bool:
        return (
            args.library != excluded_library and not (args.quick and slow) and (not wanted or name in wanted)
        )

    nodes = [p for p in library() if chosen(p.name, p.slow, "fleet")]
    fleets = [p for p in fleet_library() if chosen(p.name, p.fleet.slow, "node")]
    unknown = wanted - {p.name for p in library()} - {p.name for p in fleet_library()}
    return nodes, fleets, unknown


def main() -> int:
    args = _arguments()
    nodes, fleets, unknown = _selected(args)
    if unknown:
        print(f"unknown scenarios {sorted(unknown)}", file=sys.stderr)
        return 2
    seeds = args.seeds or ([1] if args.quick else [1, 2, 3])
    missing = [tool for tool in ("promtool", "prometheus-alertmanager") if shutil.which(tool) is None]
    if missing:
        print(f"{' and '.join(missing)} not installed: `make tools` installs them (Debian)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="servescope-alert-quality-"))
    try:
        data, page = run(nodes, fleets, seeds, args.workers, work)
    except RuntimeError as exc:  # promtool or Alertmanager refused: the message names the file
        print(f"alert quality benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.results is not None:
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / f"{NAME}.json").write_text(json.dumps(data, indent=2) + "\n")
        (args.results / f"{NAME}.md").write_text(page)
        print(page)
    elif args.quick:
        print(page)  # a quick run is a smoke test: the recorded results stay those of a full run
    else:
        write(NAME, data, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
