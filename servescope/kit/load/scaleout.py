"""Scale-out through Locust: a master and N workers as subprocesses, their records merged into one step.

Locust is the established master/worker load engine (it distributes users, gathers and merges the
workers' statistics); here each worker runs one open-loop user over its share of the seeded schedule.
Locust and gevent run only in those subprocesses: gevent's monkey-patching would break the asyncio
client and the CLI. The merged step goes through the same validity rules as a single-process run.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from servescope.core.processes import Child, free_port
from servescope.kit.load.records import RequestRecord, StepResult
from servescope.kit.load.validity import ValidityRules, client_step

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
START_SECONDS = 60.0
MAX_RECORD_LINES = 2_000_000


@dataclass(frozen=True)
class LocustPlan:
    """One distributed open-loop step."""

    base_url: str
    model: str
    rate: float
    duration_s: float
    workers: int = 2
    arrival: str = "poisson"
    cv: float = 1.0
    seed: int = 0
    prompt_tokens: int = 16
    output_tokens: int = 8
    timeout_s: float = 30.0


def locust_binary() -> str:
    """The `locust` beside this interpreter (the [load] extra installs it), else on PATH."""
    beside = Path(sys.executable).with_name("locust")
    found = str(beside) if beside.exists() else shutil.which("locust")
    if found is None:
        raise RuntimeError("locust is not installed: pip install 'servescope[load]'")
    return found


def _common(plan: LocustPlan, out: Path) -> list[str]:
    return [
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        plan.base_url,
        "--loglevel",
        "WARNING",
        "--ss-rate",
        str(plan.rate),
        "--ss-duration",
        str(plan.duration_s),
        "--ss-arrival",
        plan.arrival,
        "--ss-cv",
        str(plan.cv),
        "--ss-seed",
        str(plan.seed),
        "--ss-workers",
        str(plan.workers),
        "--ss-model",
        plan.model,
        "--ss-prompt-tokens",
        str(plan.prompt_tokens),
        "--ss-output-tokens",
        str(plan.output_tokens),
        "--ss-timeout",
        str(plan.timeout_s),
        "--ss-out",
        str(out),
    ]


def _children(plan: LocustPlan, out: Path) -> list[Child]:
    binary, port = locust_binary(), free_port()
    bound = plan.duration_s + plan.timeout_s + START_SECONDS
    master = [
        binary,
        *_common(plan, out),
        "--master",
        "--master-bind-host",
        "127.0.0.1",
        "--master-bind-port",
        str(port),
        "--expect-workers",
        str(plan.workers),
        "-u",
        str(plan.workers),
        "-r",
        str(plan.workers),
        "--run-time",
        f"{bound:.0f}s",
        "--csv",
        str(out / "locust"),
        "--csv-full-history",
    ]
    children = [Child("locust-master", master, out / "master.log")]
    for index in range(plan.workers):
        worker = [
            binary,
            *_common(plan, out),
            "--worker",
            "--master-host",
            "127.0.0.1",
            "--master-port",
            str(port),
        ]
        children.append(Child(f"locust-worker-{index}", worker, out / f"worker-{index}.log"))
    return children


def _wait_for_files(children: list[Child], out: Path, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(list(out.glob("worker-*.jsonl"))) < workers:
        dead = [c.name for c in children if not c.running()]
        if dead or time.monotonic() > deadline:
            logs = "\n".join(f"{p.name}: {p.read_text(errors='replace')[-800:]}" for p in out.glob("*.log"))
            raise RuntimeError(f"locust run did not finish ({', '.join(dead) or 'timeout'}):\n{logs}")
        time.sleep(0.2)
    # Workers report to the master every 3 s and it writes its CSV every second: let both catch up.
    time.sleep(4.5)


def read_records(out: Path) -> list[RequestRecord]:
    """Every worker's records, merged; a bad line is skipped (and counted by its absence)."""
    records: list[RequestRecord] = []
    for path in sorted(out.glob("worker-*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines()):
            if number >= MAX_RECORD_LINES:
                break
            try:
                item = json.loads(line)
                records.append(
                    RequestRecord(
                        float(item["scheduled_s"]),
                        item["sent_s"],
                        item["first_token_s"],
                        item["done_s"],
                        0,
                        int(item["output_tokens"]),
                        item["error"],
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue
    return sorted(records, key=lambda r: r.scheduled_s)


def locust_p99_ms(out: Path, name: str) -> float | None:
    """The 99 % column of Locust's own merged statistics for the request `name` (from its CSV)."""
    path = out / "locust_stats.csv"
    if not path.exists():
        return None
    for row in csv.DictReader(path.read_text().splitlines()):
        if row.get("Name") == name and row.get("99%") not in (None, "", "N/A"):
            return float(row["99%"])
    return None


def run_locust(plan: LocustPlan, rules: ValidityRules | None = None, work: Path | None = None) -> StepResult:
    """Run the plan on a local master and `plan.workers` workers; one merged, validity-checked step."""
    rules = rules or ValidityRules()
    out = work or Path(tempfile.mkdtemp(prefix="servescope-locust-"))
    out.mkdir(parents=True, exist_ok=True)
    children = _children(plan, out)
    try:
        for child in children:
            child.start()
        _wait_for_files(children, out, plan.workers, plan.duration_s + plan.timeout_s + START_SECONDS)
    finally:
        for child in children:
            child.stop(grace=5.0)
    locust_ttft = locust_p99_ms(out, "ttft")
    notes = (
        f"open loop, {plan.arrival} arrivals, Locust master + {plan.workers} workers",
        f"Locust's merged histogram: ttft p99 {locust_ttft} ms",
    )
    return client_step("open", plan.rate, plan.duration_s, read_records(out), rules, notes=notes)
