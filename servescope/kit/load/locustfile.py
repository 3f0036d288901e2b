"""The Locust side of `servescope load locust`: one open-loop user per worker, its share of one schedule.

Loaded only by the `locust` processes that `scaleout.py` starts (gevent patches the interpreter there;
it never enters the servescope or pytest process). The orchestrator writes the whole step to a file:
every request's due time and body, drawn once from the run's workload, so the workers send exactly the
requests one process would; worker N sends every workers-th of them. All workers start on one signal
(a `go` file naming the start on the wall clock), so their records share one time base. Requests go
out through geventhttpclient (what Locust's FastHttpUser uses: a fraction of `requests`' CPU per
request), each in its own greenlet; every request is reported to Locust (the `ttft` and `e2e` rows its
master merges) and written to the worker's JSONL file, which the orchestrator merges exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.pool import Pool
from geventhttpclient import HTTPClient
from locust import User, constant, events, task
from locust.env import Environment

from servescope.core.errors import ServescopeError

MAX_IN_FLIGHT = 256
POLL_S = 0.02


def _options(parser: Any) -> None:
    parser.add_argument("--ss-work", default="", help="folder of the step: schedule, go signal, records")
    parser.add_argument("--ss-workers", type=int, default=1)
    parser.add_argument("--ss-path", default="/v1/completions")
    parser.add_argument("--ss-timeout", type=float, default=30.0)


events.init_command_line_parser.add_listener(_options)  # type: ignore[no-untyped-call]


def _fire(env: Environment, name: str, seconds: float | None, error: str | None) -> None:
    env.events.request.fire(  # type: ignore[no-untyped-call]
        request_type="POST",
        name=name,
        response_time=(seconds or 0.0) * 1000.0,
        response_length=0,
        exception=RuntimeError(error) if error else None,
        context={},
    )


def _start_time(work: Path, index: int) -> float:
    """Say this worker is ready, wait for the go signal; the step's start on this process's clock."""
    (work / f"ready-{index}").write_text("")
    go = work / "go"
    while not go.exists():
        gevent.sleep(POLL_S)
    start_wall = float(json.loads(go.read_text())["start_wall"])
    return time.perf_counter() + (start_wall - time.time())


class OpenLoopUser(User):
    """Sends this worker's share of the schedule; each request in its own greenlet, bounded."""

    wait_time = constant(0)  # the one task never returns: it runs the whole schedule

    @task
    def run_schedule(self) -> None:
        opts = self.environment.parsed_options
        index = max(0, getattr(self.environment.runner, "worker_index", 0))
        work = Path(opts.ss_work)
        lines = (work / "schedule.jsonl").read_text().splitlines()
        mine = [json.loads(line) for line in lines[index :: opts.ss_workers]]
        client = HTTPClient.from_url(
            str(self.host),
            concurrency=MAX_IN_FLIGHT,
            network_timeout=opts.ss_timeout,
            connection_timeout=opts.ss_timeout,
        )
        pool, records = Pool(MAX_IN_FLIGHT), list[dict[str, Any]]()
        start = _start_time(work, index)
        for item in mine:
            delay = item["at"] - (time.perf_counter() - start)
            if delay > 0:
                gevent.sleep(delay)
            pool.spawn(self._one, client=client, item=item, start=start, records=records)
        pool.join(timeout=opts.ss_timeout + 1.0)
        (work / f"worker-{index}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        while True:  # the orchestrator stops the run once every worker has written its file
            gevent.sleep(3600)

    def _one(
        self, *, client: HTTPClient, item: dict[str, Any], start: float, records: list[dict[str, Any]]
    ) -> None:
        opts = self.environment.parsed_options
        at = item["at"]
        record: dict[str, Any] = {"scheduled_s": at, "sent_s": time.perf_counter() - start, "gaps": []}
        record.update(first_token_s=None, done_s=None, output_tokens=0, error=None)
        record["prompt_tokens"] = item["prompt_tokens"]
        try:
            with gevent.Timeout(opts.ss_timeout, _TimeoutError):
                _exchange(client, opts.ss_path, item["body"], record, start)
        except _FailedError as exc:
            record["error"] = str(exc)
        except _TimeoutError:
            record["error"] = "timeout"
        except (OSError, ValueError):
            record["error"] = "protocol"
        records.append(record)
        ttft = None if record["first_token_s"] is None else record["first_token_s"] - at
        e2e = None if record["done_s"] is None else record["done_s"] - at
        _fire(self.environment, "ttft", ttft, record["error"])
        _fire(self.environment, "e2e", e2e, record["error"])


class _FailedError(ServescopeError):
    reason = "request_failed"


class _TimeoutError(ServescopeError):
    reason = "timeout"


def _exchange(
    client: HTTPClient, path: str, body: dict[str, Any], record: dict[str, Any], start: float
) -> None:
    headers = {"Content-Type": "application/json"}
    response = client.post(path, json.dumps(body).encode(), headers=headers)
    try:
        if response.status_code != 200:
            response.read()
            raise _FailedError(f"http_{response.status_code}")
        while True:
            line = response.readline(b"\n")
            if not line:
                break
            _read_line(line, record, start)
    finally:
        response.release()
    record["done_s"] = time.perf_counter() - start
    if record["first_token_s"] is None:
        record["error"] = "no_content"


def _read_line(line: bytes, record: dict[str, Any], start: float) -> None:
    line = line.strip()
    if not line.startswith(b"data:") or line == b"data: [DONE]":
        return
    chunk = json.loads(line[5:])
    choices = chunk.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    if choice.get("text") or (isinstance(delta, dict) and delta.get("content")):
        now = time.perf_counter() - start
        if record["first_token_s"] is None:
            record["first_token_s"] = now
        else:
            record["gaps"].append(now - record["last_s"])
        record["last_s"] = now
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        record["output_tokens"] = int(usage.get("completion_tokens") or 0)
