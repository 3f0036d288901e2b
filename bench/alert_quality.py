"""Alert quality: precision, recall, detection latency and leak lead time of the committed alert rules.

Plays the scenario library (bench/quality/library.py) for several seeds on simulated nodes whose
series come from the exporter's own sources, imports them with promtool, evaluates every alert of
alerts/build/rules.yaml with a real Prometheus at the rule evaluation step, applies `for`, and scores
the firing episodes against each scenario's ground-truth incidents. Writes
bench/results/alert-quality.{json,md}. Exit status 0 whether or not a target is met.
Usage: python bench/alert_quality.py [--quick] [--seeds 1 2 3] [--workers 2] [--only NAME ...]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, write
from quality.evaluate import Episode, RunOutcome, score
from quality.library import library
from quality.node import Timing
from quality.openmetrics import names_read_by
from quality.pages import markdown as pages_markdown
from quality.pages import pager_timing, per_incident
from quality.prom import LOOKBACK, AlertRule, Prometheus, load_rules
from quality.report import markdown, to_json
from quality.runs import Generated, RunSpec, evaluate_rule, gather_blocks, generate
from quality.scenarios import Plan
from quality.targets import summary, targets

from servescope.bundle.alerts.bundle import rule_file
from servescope.core.config import AlertsConfig
from servescope.sim.models import MIB

ROOT = Path(__file__).resolve().parents[1]
RULES = ALERTS_BUILD / "rules.yaml"
NAME = "alert-quality"
STEP_S = 30.0
TIMING = Timing(nvml_interval=5.0, scrape_interval=30.0)


def _generate(job: tuple[RunSpec, Path]) -> Generated:
    """Worker: one run, from scenario to TSDB blocks."""
    spec, work = job
    logging.disable(logging.WARNING)  # engines going down on purpose would fill the console
    plan = {p.name: p for p in library()}[spec.plan]
    alerts, _ = load_rules(RULES)
    return generate(spec, plan, names_read_by(a.expr for a in alerts), work, TIMING)


def simulate(plans: list[Plan], seeds: list[int], work: Path, workers: int) -> list[Generated]:
    jobs = [(RunSpec(p.name, seed, 0), p.duration) for p in plans for seed in seeds]
    # Longest first, so that the pool does not end on one long run; slots in a fixed order.
    specs = [RunSpec(s.plan, s.seed, slot) for slot, (s, _) in enumerate(jobs)]
    order = sorted(range(len(specs)), key=lambda i: -jobs[i][1])
    done: list[Generated] = []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for generated in pool.imap_unordered(_generate, [(specs[i], work) for i in order]):
            print(
                f"  {generated.spec.instance:<32} simulated {generated.duration / 3600:.2f} h in "
                f"{generated.simulate_s:5.1f} s, imported {generated.samples:,} samples "
                f"in {generated.import_s:.1f} s",
                flush=True,
            )
            done.append(generated)
    return sorted(done, key=lambda g: g.spec.slot)


def evaluate(
    prom: Prometheus, runs: list[Generated], alerts: list[AlertRule], workers: int
) -> list[RunOutcome]:
    jobs = [(g, rule) for g in runs for rule in alerts]
    with ThreadPoolExecutor(max(2, workers)) as pool:
        found = list(
            pool.map(lambda job: evaluate_rule(prom, job[0].spec, job[0].duration, job[1], STEP_S), jobs)
        )
    episodes: dict[int, list[Episode]] = {}
    for (g, _), eps in zip(jobs, found, strict=True):
        episodes.setdefault(g.spec.slot, []).extend(eps)
    return [
        RunOutcome(g.spec.plan, g.spec.seed, g.windows, tuple(episodes.get(g.spec.slot, []))) for g in runs
    ]


def rules_stale() -> bool:
    committed = yaml.safe_load(RULES.read_text())
    return bool(committed != rule_file(AlertsConfig()))


def prometheus_version() -> str:
    done = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False)
    words = (done.stdout or done.stderr).split()
    return words[2] if len(words) > 2 else "unknown"


def run(plans: list[Plan], seeds: list[int], workers: int, work: Path) -> tuple[dict[str, Any], str]:
    """The whole benchmark in `work`: the results as JSON data and as Markdown."""
    timing: dict[str, float] = {}
    started = mark = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal mark
        timing[phase] = time.perf_counter() - mark
        mark = time.perf_counter()
        print(f"{phase}: {timing[phase]:.1f} s", flush=True)

    alerts, _ = load_rules(RULES)
    print(f"simulating {len(plans)} scenarios x {len(seeds)} seeds on {workers} workers", flush=True)
    runs = simulate(plans, seeds, work, workers)
    lap("simulate + import")
    with Prometheus(gather_blocks(work)) as prom:
        lap("prometheus start")
        outcomes = evaluate(prom, runs, alerts, workers)
        lap("evaluate")
    scores = score(outcomes, {a.name: a.severity for a in alerts})
    leak_rates = {p.name: p.scenario.leak_bytes_per_second * 60 / MIB for p in plans if p.scenario.leak}
    found = targets(scores, leak_rates)
    lap("score")
    timing["total"] = time.perf_counter() - started
    meta: dict[str, Any] = {
        "machine": machine(),
        "timing_s": {k: round(v, 2) for k, v in timing.items()},
        "rules": {"file": str(RULES.relative_to(ROOT)), "stale": rules_stale()},
        "prometheus": prometheus_version(),
        "step_s": STEP_S,
        "lookback": LOOKBACK,
        "scrape_s": TIMING.scrape_interval,
        "nvml_s": TIMING.nvml_interval,
        "samples": sum(g.samples for g in runs),
        "summary": summary(scores, leak_rates),
    }
    pager = pager_timing(ALERTS_BUILD / "alertmanager.yaml")
    paging = per_incident(outcomes, pager)
    data = to_json(scores, plans, seeds, meta, found) | {"pages": paging}
    return data, markdown(scores, plans, seeds, meta, found) + "\n" + pages_markdown(paging, pager)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seed 1 only, without the slow scenarios")
    parser.add_argument("--seeds", type=int, nargs="+", help="default: 1 2 3 (1 with --quick)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="only these scenarios")
    parser.add_argument("--keep", action="store_true", help="keep the OpenMetrics files and the TSDB")
    parser.add_argument(
        "--results",
        type=Path,
        help="write alert-quality.{json,md} here (default: bench/results; --quick prints only)",
    )
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    known = library()
    unknown = set(args.only or ()) - {p.name for p in known}
    if unknown:
        print(
            f"unknown scenarios {sorted(unknown)}; known: {', '.join(p.name for p in known)}", file=sys.stderr
        )
        return 2
    plans = [p for p in known if (not args.quick or not p.slow) and (not args.only or p.name in args.only)]
    seeds = args.seeds or ([1] if args.quick else [1, 2, 3])
    missing = [tool for tool in ("promtool", "prometheus") if shutil.which(tool) is None]
    if missing:
        print(
            f"{' and '.join(missing)} not installed: `make tools` installs Debian's prometheus",
            file=sys.stderr,
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="servescope-alert-quality-"))
    try:
        data, page = run(plans, seeds, args.workers, work)
    except RuntimeError as exc:  # promtool or Prometheus refused: the message names the file or query
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
