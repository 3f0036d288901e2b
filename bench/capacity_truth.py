"""The knee and the regression gate against a computed truth, at the defaults `capacity run` ships.

The engine is the operators' example: 4 FIFO slots, 40 ms prefill, 5 ms per further token, 32 output
tokens; its steady-state knee for P99 TTFT <= 500 ms is computed by a queue simulation (16.3 req/s,
tests/capacity/fifo_truth.py). On a virtual clock: how often the knee's 95 % interval holds it and how
close the estimate lies over independent searches (default plan: 30 s parts of at least 1000
requests, 4 parts at most); how often `capacity compare` flags a pair of identical configurations
(at least 50 pairs), and how often a 15 % slower engine (its capacity 13 % lower). Writes
bench/results/capacity-truth.{json,md}; docs/capacity-and-tuning.md quotes them.

Usage: python bench/capacity_truth.py [--searches 40] [--pairs 60] [--slow-pairs 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # run as a script: the root, for `bench`

from bench.common import machine, write  # noqa: E402
from tests.capacity.fifo_truth import FifoEngine  # noqa: E402
from tests.capacity.studies import P99_PLAN, compare_study, knee_coverage  # noqa: E402


def main() -> None:
    # One piece: three studies and the table of their figures.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--slow-pairs", type=int, default=30)
    args = parser.parse_args()
    engine = FifoEngine()
    coverage = knee_coverage(engine, P99_PLAN, args.searches)
    print(coverage.line(), flush=True)
    identical = compare_study(engine, P99_PLAN, args.pairs)
    print(f"identical: {identical.flagged}/{identical.pairs}", flush=True)
    slower = compare_study(engine, P99_PLAN, args.slow_pairs, slowdown=1.15)
    print(f"15 % slower: {slower.flagged}/{slower.pairs}", flush=True)
    data = {
        "machine": machine(),
        "truth": coverage.truth,
        "searches": coverage.searches,
        "covered": coverage.covered,
        "within_10": coverage.within_10,
        "errors": coverage.errors,
        "widths": coverage.widths,
        "load_seconds": coverage.seconds,
        "identical_pairs": identical.pairs,
        "false_positives": identical.flagged,
        "slow_pairs": slower.pairs,
        "detected": slower.flagged,
    }
    markdown = "\n".join(
        [
            "Virtual FIFO engine (4 slots, 40 ms prefill, 5 ms/token, 32 tokens), P99 TTFT <= 500 ms, "
            "capacity run's default plan.",
            "",
            "| what | result |",
            "| --- | --- |",
            f"| knee | {coverage.line()} |",
            f"| compare, identical configurations | {identical.flagged} of {identical.pairs} flagged "
            f"({identical.rate:.1%}) |",
            f"| compare, 15 % slower engine | {slower.flagged} of {slower.pairs} flagged "
            f"({slower.rate:.0%}) |",
        ]
    )
    write("capacity-truth", data, markdown + "\n")


if __name__ == "__main__":
    main()
