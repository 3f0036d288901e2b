"""The Locust side of `servescope load locust`: one open-loop user per worker, its share of one schedule.

Loaded only by the `locust` processes that `scaleout.py` starts (gevent patches the interpreter there;
it never enters the servescope or pytest process). Each worker precomputes the whole seeded schedule
and keeps every N-th send (its index from the master), so N workers together send exactly the schedule
one process would. Latency is measured from the scheduled time, as in `servescope load run`. Every
request is reported to Locust (its master merges the workers' histograms: the `ttft` and `e2e` rows)
and written to the worker's JSONL file, which the orchestrator merges exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gevent
import requests
from gevent.pool import Pool
from locust import User, constant, events, task
from locust.env import Environment

from servescope.kit.load.client import RequestSpec, body_of
from servescope.kit.load.schedule import LengthDistribution, Shape, arrival_times, split_schedule

MAX_IN_FLIGHT = 256


def _options(parser: Any) -> None:
    parser.add_argument("--ss-rate", type=float, default=1.0, help="offered req/s over all workers")
    parser.add_argument("--ss-duration", type=float, default=10.0)
    parser.add_argument("--ss-arrival", default="poisson")
    parser.add_argument("--ss-cv", type=float, default=1.0)
    parser.add_argument("--ss-seed", type=int, default=0)
    parser.add_argument("--ss-workers", type=int, default=1)
    parser.add_argument("--ss-model", default="mock")
    parser.add_argument("--ss-prompt-tokens", type=int, default=16)
    parser.add_argument("--ss-output-tokens", type=int, default=8)
    parser.add_argument("--ss-timeout", type=float, default=30.0)
    parser.add_argument("--ss-out", default="", help="folder for the workers' record files")


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


class OpenLoopUser(User):
    """Sends this worker's share of the schedule; each request in its own greenlet, bounded."""

    wait_time = constant(0)  # the one task never returns: it runs the whole schedule

    @task
    def run_schedule(self) -> None:
        opts = self.environment.parsed_options
        runner = self.environment.runner
        index = max(0, getattr(runner, "worker_index", 0))
        times = arrival_times(
            opts.ss_rate, opts.ss_duration, arrival=opts.ss_arrival, cv=opts.ss_cv, seed=opts.ss_seed
        )
        mine = split_schedule(times, opts.ss_workers, index)
        shapes = LengthDistribution(opts.ss_prompt_tokens, opts.ss_output_tokens).sample(
            len(times), opts.ss_seed
        )
        session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=MAX_IN_FLIGHT)
        session.mount("http://", adapter)
        pool, records = Pool(MAX_IN_FLIGHT), list[dict[str, Any]]()
        start = time.perf_counter()
        for number, at in enumerate(mine):
            delay = at - (time.perf_counter() - start)
            if delay > 0:
                gevent.sleep(delay)
            shape = shapes[number * opts.ss_workers + index]
            pool.spawn(
                self._one,
                session=session,
                at=at,
                start=start,
                prompt=shape.prompt_tokens,
                output=shape.output_tokens,
                records=records,
            )
        pool.join(timeout=opts.ss_timeout + 1.0)
        out = Path(opts.ss_out) / f"worker-{index}.jsonl"
        out.write_text("".join(json.dumps(r) + "\n" for r in records))
        while True:  # the orchestrator stops the run once every worker has written its file
            gevent.sleep(3600)

    def _one(
        self,
        *,
        session: requests.Session,
        at: float,
        start: float,
        prompt: int,
        output: int,
        records: list[dict[str, Any]],
    ) -> None:
        opts = self.environment.parsed_options
        record: dict[str, Any] = {"scheduled_s": at, "sent_s": time.perf_counter() - start}
        record.update(first_token_s=None, done_s=None, output_tokens=0, error=None)
        spec = RequestSpec(str(self.host), opts.ss_model, timeout_s=opts.ss_timeout)
        try:
            _exchange(session, spec, body_of(spec, Shape(prompt, output)), record, start)
        except _FailedError as exc:
            record["error"] = str(exc)
        except requests.Timeout:
            record["error"] = "timeout"
        except requests.ConnectionError:
            record["error"] = "connect"
        except (requests.RequestException, ValueError):
            record["error"] = "protocol"
        records.append(record)
        ttft = None if record["first_token_s"] is None else record["first_token_s"] - at
        e2e = None if record["done_s"] is None else record["done_s"] - at
        _fire(self.environment, "ttft", ttft, record["error"])
        _fire(self.environment, "e2e", e2e, record["error"])


def _exchange(
    session: requests.Session, spec: RequestSpec, body: dict[str, Any], record: dict[str, Any], start: float
) -> None:
    url = f"{spec.base_url}/v1/completions"
    with session.post(url, json=body, stream=True, timeout=spec.timeout_s) as response:
        if response.status_code != 200:
            raise _FailedError(f"http_{response.status_code}")
        for line in response.iter_lines():
            _read_line(line, record, start)
    record["done_s"] = time.perf_counter() - start
    if record["first_token_s"] is None:
        record["error"] = "no_content"


class _FailedError(Exception):
    pass


def _read_line(line: bytes, record: dict[str, Any], start: float) -> None:
    if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
        return
    chunk = json.loads(line[5:])
    choices = chunk.get("choices") or []
    if choices and choices[0].get("text") and record["first_token_s"] is None:
        record["first_token_s"] = time.perf_counter() - start
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        record["output_tokens"] = int(usage.get("completion_tokens") or 0)
