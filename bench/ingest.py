"""Exposition ingest: µs per line for prometheus_client's text parser and servescope's, per sample file.

Inputs: every Prometheus exposition in tests/fixtures/samples, and a synthetic 16-engine vLLM exposition (the
families of vllm-0.32-cpu-idle.txt replicated with engine="0".."15"). Each figure is the best of N runs,
taken in turn so that both parsers see the same machine load; the garbage collector is off while timing,
as timeit does. "cold" is a new parser, which knows no series yet (a first scrape); "warm" is every
later scrape of the same server; "keep" keeps only the vllm:/sglang: families, as the vLLM source does.
Usage: python bench/ingest.py [--runs 40]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from prometheus_client.parser import text_string_to_metric_families

from bench.common import machine, write
from servescope.core.exposition import ExpositionParser

# The captured expositions the tests read (tests/fixtures/README.md says where each came from).
SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples"
ENGINES = 16


def engine_family(name: str) -> bool:
    return name.startswith(("vllm:", "sglang:"))


def expositions() -> dict[str, str]:
    """Sample files that prometheus_client reads as an exposition with samples, by file name."""
    found = {}
    for path in sorted(SAMPLES.glob("*.txt")):
        text = path.read_text()
        try:
            families = list(text_string_to_metric_families(text))
        except Exception:  # not an exposition (e.g. dcgmi dmon output)
            continue
        if any(f.samples for f in families):
            found[path.name] = text
    return found


def replicate_engines(text: str, engines: int = ENGINES) -> str:
    """The exposition with each family's engine="0" samples repeated for engines 0..engines-1."""
    out: list[str] = []
    pending: list[str] = []
    for line in [*text.splitlines(), ""]:
        if 'engine="0"' in line:
            pending.append(line)
            continue
        out += [held.replace('engine="0"', f'engine="{e}"') for e in range(engines) for held in pending]
        pending = []
        out.append(line)
    return "\n".join(out)


def best_of(runs: int, jobs: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Best wall time in seconds of each job, the jobs taken in turn run after run."""
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(runs):
        for name, job in jobs.items():
            gc.disable()
            started = time.perf_counter()
            job()
            elapsed = time.perf_counter() - started
            gc.enable()
            best[name] = min(best[name], elapsed)
    return best


def measure(text: str, runs: int) -> dict[str, float]:
    """µs per line of each parser on one exposition, after checking that both read it the same."""
    scraper = ExpositionParser()  # the parser of one scraped server, warm after its first scrape
    ours = scraper.parse(text)
    theirs = list(text_string_to_metric_families(text))
    assert [(f.name, len(f.samples)) for f in ours] == [(f.name, len(f.samples)) for f in theirs]
    lines = len(text.splitlines())
    seconds = best_of(
        runs,
        {
            "prometheus_client": lambda: list(text_string_to_metric_families(text)),
            "cold": lambda: ExpositionParser().parse(text),
            "warm": lambda: scraper.parse(text),
            "keep": lambda: scraper.parse(text, keep=engine_family),
        },
    )
    result = {f"{name}_us_per_line": s / lines * 1e6 for name, s in seconds.items()}
    result |= {
        "lines": lines,
        "speedup_warm": seconds["prometheus_client"] / seconds["warm"],
        "speedup_cold": seconds["prometheus_client"] / seconds["cold"],
        "speedup_keep": seconds["prometheus_client"] / seconds["keep"],
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    inputs = expositions()
    # Files that are not expositions (dcgmi dmon output) are named in the results, not silently dropped.
    skipped = sorted(p.name for p in SAMPLES.iterdir() if p.is_file() and p.name not in inputs)
    inputs[f"synthetic: {ENGINES} vLLM engines"] = replicate_engines(inputs["vllm-0.32-cpu-idle.txt"])
    results = {name: measure(text, args.runs) for name, text in inputs.items()}
    rows = [
        f"| {name} | {r['lines']:.0f} | {r['prometheus_client_us_per_line']:.2f} "
        f"| {r['cold_us_per_line']:.2f} | {r['warm_us_per_line']:.2f} | {r['keep_us_per_line']:.2f} "
        f"| {r['speedup_cold']:.1f}x | {r['speedup_warm']:.1f}x | {r['speedup_keep']:.1f}x |"
        for name, r in results.items()
    ]
    lines = [
        "# Exposition ingest benchmark",
        "",
        f"Machine: {machine()}",
        "",
        f"µs per line, best of {args.runs} runs (pure Python; cold = first scrape, warm = later scrapes, "
        "keep = only vllm:/sglang: families kept):",
        "",
        "| input | lines | prometheus_client | servescope cold | servescope warm | servescope keep "
        "| speed-up cold | speed-up warm | speed-up keep |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Not expositions, not parsed: {', '.join(skipped) or 'none'}.",
        "",
        "Target: servescope (warm, keep=None) >= 10x faster than prometheus_client on every input.",
        "",
    ]
    data = {"machine": machine(), "runs": args.runs, "inputs": results, "skipped": skipped}
    write("ingest", data, "\n".join(lines))


if __name__ == "__main__":
    main()
