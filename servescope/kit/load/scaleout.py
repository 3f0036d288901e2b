"""Scale-out through Locust: a master and N workers as subprocesses, their records merged into one step.

Locust is the established master/worker load engine (it distributes users, gathers and merges the
workers' statistics); here each worker runs one open-loop user over its share of one schedule, which
this process draws (due times and request bodies from the run's workload) and writes for them. The
workers start together on a signal, so the merged records share one time base; the engine's /metrics
is sampled from here meanwhile, on its own thread. Locust and gevent run only in the subprocesses:
gevent's monkey-patching would break the asyncio client and the CLI. The merged step is judged by the
same rules as a single-process run, and `LocustStepRunner` lets capacity and tuning drive it.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from servescope.core.processes import Child, free_port
from servescope.kit.load.client import PATHS, Api, RequestSpec, body_of
from servescope.kit.load.engine_metrics import EngineWatch, observed
from servescope.kit.load.pressure import cpu_pressure
from servescope.kit.load.records import ClientCost, RequestRecord, StepResult
from servescope.kit.load.runner import ShapeSource
from servescope.kit.load.schedule import Arrival, LengthDistribution, arrival_times, step_prompts_seed
from servescope.kit.load.validity import ValidityRules, client_step

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
START_SECONDS = 60.0
GO_LEAD_S = 0.5  # the workers start this long after the signal, all at once
MAX_RECORD_LINES = 2_000_000
TICKS = 100  # clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ on Linux)


@dataclass(frozen=True)
class LocustPlan:
    """One distributed open-loop step."""

    base_url: str
    model: str
    rate: float
    duration_s: float
    workers: int = 2
    arrival: Arrival = "poisson"
    cv: float = 1.0
    seed: int = 0
    workload: ShapeSource = field(default_factory=lambda: LengthDistribution(16, 8))
    api: Api = "completions"
    timeout_s: float = 30.0
    warmup_s: float = 0.0
    engine_metrics_url: str | None = None
    priority: bool = False


def locust_binary() -> str:
    """The `locust` beside this interpreter (the [load] extra installs it), else on PATH."""
    beside = Path(sys.executable).with_name("locust")
    found = str(beside) if beside.exists() else shutil.which("locust")
    if found is None:
        raise RuntimeError("locust is not installed: pip install 'servescope[load]'")
    return found


def write_schedule(plan: LocustPlan, out: Path) -> int:
    """Every request of the step (warm-up first, due times from the window's start) for the workers."""
    window = plan.warmup_s + plan.duration_s
    times = arrival_times(plan.rate, window, arrival=plan.arrival, cv=plan.cv, seed=plan.seed)
    spec = RequestSpec(plan.base_url, plan.model, plan.api, timeout_s=plan.timeout_s, priority=plan.priority)
    shapes = plan.workload.sample(len(times), step_prompts_seed(plan.seed, plan.rate))
    with (out / "schedule.jsonl").open("w") as lines:
        for at, shape in zip(times, shapes, strict=True):
            item = {
                "at": at - plan.warmup_s,
                "prompt_tokens": shape.prompt_tokens,
                "body": body_of(spec, shape),
            }
            lines.write(json.dumps(item) + "\n")
    return len(times)


def _common(plan: LocustPlan, out: Path) -> list[str]:
    return [
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        plan.base_url,
        "--loglevel",
        "WARNING",
        "--ss-work",
        str(out),
        "--ss-workers",
        str(plan.workers),
        "--ss-path",
        PATHS[plan.api],
        "--ss-timeout",
        str(plan.timeout_s),
    ]


def _children(plan: LocustPlan, out: Path) -> list[Child]:
    binary, port = locust_binary(), free_port()
    bound = plan.warmup_s + plan.duration_s + plan.timeout_s + START_SECONDS
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


def _wait_for(children: list[Child], out: Path, pattern: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(list(out.glob(pattern))) < count:
        dead = [c.name for c in children if not c.running()]
        if dead or time.monotonic() > deadline:
            logs = "\n".join(f"{p.name}: {p.read_text(errors='replace')[-800:]}" for p in out.glob("*.log"))
            raise RuntimeError(f"locust run did not finish ({', '.join(dead) or 'timeout'}):\n{logs}")
        time.sleep(0.05)


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
                        int(item.get("prompt_tokens", 0)),
                        int(item["output_tokens"]),
                        item["error"],
                        tuple(float(gap) for gap in item.get("gaps", ())),
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


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds of a live process so far (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


def run_locust(plan: LocustPlan, rules: ValidityRules | None = None, work: Path | None = None) -> StepResult:
    """Run the plan on a local master and `plan.workers` workers; one merged, judged step."""
    # One piece: the children, the go signal and the engine watch must be stopped by one finally.
    rules = rules or ValidityRules()
    out = work or Path(tempfile.mkdtemp(prefix="servescope-locust-"))
    out.mkdir(parents=True, exist_ok=True)
    sent = write_schedule(plan, out)
    children = _children(plan, out)
    watch = EngineWatch(plan.engine_metrics_url) if plan.engine_metrics_url else None
    try:
        for child in children:
            child.start()
        _wait_for(children, out, "ready-*", plan.workers, START_SECONDS)
        if watch is not None:
            # The engine's first page is read before the signal, so that no request can be sent before it
            # (read just before the start instead, a busy machine's slow read let the first requests'
            # tokens in before it); the step's tokens are generated from the workers' start on.
            watch.open()
        began = time.time() + GO_LEAD_S
        cpu_before = sum(cpu_seconds(child.pid) for child in children[1:])
        (out / "go").write_text(json.dumps({"start_wall": began}))
        if watch is not None:
            watch.first_at = time.perf_counter() + (began - time.time())
            watch.start(lambda: time.time() - began - plan.warmup_s)
        _wait_for(
            children, out, "worker-*.jsonl", plan.workers, plan.duration_s + plan.timeout_s + START_SECONDS
        )
        cpu = sum(cpu_seconds(child.pid) for child in children[1:]) - cpu_before
        wall = time.time() - began
    finally:
        if watch is not None:
            watch.close()
        for child in children:
            child.stop(grace=5.0)
    records = read_records(out)
    engine, throughput = observed(watch, records)
    notes = (
        f"open loop, {plan.arrival} arrivals, Locust master + {plan.workers} workers",
        f"Locust's merged histogram: ttft p99 {locust_p99_ms(out, 'ttft')} ms",
    )
    return client_step(
        "open",
        plan.rate,
        plan.duration_s,
        [r for r in records if r.scheduled_s >= 0],
        rules,
        engine=engine,
        notes=notes,
        throughput=throughput,
        client=ClientCost(cpu, wall, sent, cpu_pressure()),
        warmup_s=plan.warmup_s,
    )


@dataclass
class LocustStepRunner:
    """A `StepRunner` that sends each step through Locust workers (`capacity --locust-workers`)."""

    plan: LocustPlan
    rules: ValidityRules = field(default_factory=ValidityRules)

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        return run_locust(replace(self.plan, rate=offered, duration_s=duration_s, seed=seed), self.rules)
