"""Shared by the runbook tests: runbook files, a recording HTTP server, a fake kubectl, hostile labels."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from servescope.exporter.vllm.scrape import ACCEPT as VLLM_SCRAPE_ACCEPT
from servescope.runbooks.actions import ACTIONS, RunContext, StepResult
from tests.support import Served, start_servescope, stop
from tests.support.http_fakes import QuietHandler, loopback_http

FRONT = """---
alert: {alert}
severity: {severity}
summary: {summary}
---
# {alert}

## Meaning
What the alert means.

## Impact
What it costs.

## Diagnosis
Look first.

"""


def step(step_id: str, kind: str, action: str, params: str = "", title: str = "A step") -> str:
    body = f"action: {action}\n"
    if params:
        body += "params:\n" + textwrap.indent(textwrap.dedent(params).strip("\n"), "  ") + "\n"
    return f'```step id={step_id} kind={kind} title="{title}"\n{body}```\n\n'


def runbook_text(
    alert: str = "TestAlert",
    steps: str = "",
    mitigation: str = "",
    severity: str = "warning",
    summary: str = "Something happened.",
) -> str:
    if not steps:
        steps = step("snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"')
    return (
        FRONT.format(alert=alert, severity=severity, summary=summary)
        + steps
        + "## Mitigation\nAct.\n\n"
        + mitigation
    )


def write_runbook(folder: Path, alert: str = "TestAlert", **kwargs: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{alert}.md"
    path.write_text(runbook_text(alert, **kwargs), encoding="utf-8")
    return path


VECTOR = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [{"metric": {"__name__": "up", "gpu": "0"}, "value": [1, "1"]}],
    },
}


def go_unquote(literal: str) -> str:
    """Decode a PromQL (Go) double-quoted literal; fails if a quote inside is not escaped."""
    assert literal[0] == '"' and literal[-1] == '"'
    out, i = [], 1
    simple = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    while i < len(literal) - 1:
        ch = literal[i]
        assert ch != '"', f"unescaped quote at {i} in {literal!r}"
        assert ch not in "\n\r\x00", f"raw control character at {i}"
        if ch == "\\":
            code = literal[i + 1]
            if code == "u":
                out.append(chr(int(literal[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(simple[code])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def run(name: str, ctx: RunContext, **params: Any) -> StepResult:
    """Run the registered action `name` with `params` validated as a runbook step's would be."""
    action = ACTIONS[name]
    return action.run(action.params.model_validate(params), ctx)


def recorded(marker: Path) -> list[list[str]]:
    """The argv lists the fake kubectl recorded in `marker`, in order."""
    return [json.loads(line) for line in marker.read_text().splitlines()] if marker.exists() else []


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def scrape(self) -> bool:
        """A scrape by a Prometheus or a servescope exporter (its vLLM scraper's Accept header): another
        test's, on a freed port this fake was given, never a runbook step's request."""
        return self.headers.get("User-Agent", "").startswith("Prometheus/") or (
            self.headers.get("Accept") == VLLM_SCRAPE_ACCEPT
        )


@dataclass
class FakeHttp:
    """A loopback HTTP server answering every request with `reply(request)` and recording requests."""

    base: str
    requests: list[Recorded] = field(default_factory=list)


Reply = Callable[[Recorded], tuple[int, Any]]


@contextmanager
def fake_http(reply: Reply) -> Iterator[FakeHttp]:
    holder: dict[str, FakeHttp] = {}

    class Handler(QuietHandler):
        def answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            parts = urlsplit(self.path)
            body = self.rfile.read(length)
            request = Recorded(method, parts.path, parse_qs(parts.query), body, dict(self.headers))
            holder["fake"].requests.append(request)
            status, payload = reply(request)
            self.reply(status, json.dumps(payload).encode(), "application/json")

    with loopback_http(Handler) as base:
        holder["fake"] = FakeHttp(base)
        yield holder["fake"]


def start_simulated_exporter(*extra: str) -> Served:
    """`servescope serve --simulate --gpus 4 --engines 2`, once both engines have batch advice and GPUs."""
    served = start_servescope(
        "--simulate",
        "--gpus",
        "4",
        "--engines",
        "2",
        "--vllm-interval",
        "1",
        "--derived-interval",
        "1",
        *extra,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = httpx.get(f"{served.base}/metrics").text.splitlines()

        def count(prefix: str, lines: list[str] = lines) -> int:
            return sum(1 for line in lines if line.startswith(prefix + "{"))

        if (
            count("servescope_serving_recommended_max_num_seqs") == 2
            and count("servescope_engine_gpu_info") == 4
        ):
            return served
        time.sleep(0.2)
    stop(served)
    raise AssertionError("the simulated exporter did not export advice and GPUs of both engines within 30 s")


def fake_kubectl(folder: Path) -> tuple[Path, Path]:
    """An executable that records its argv (JSON) in a marker file: (program, marker).

    Reads (`get`) are answered and not recorded: a 1-replica Deployment and empty lists (no autoscaler,
    no budget, no pod), as the reads the change actions rest on would find in an empty namespace.
    """
    marker = folder / "kubectl-ran.json"
    program = folder / "kubectl"
    program.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "if sys.argv[1] == 'get':\n"
        "    deployment = sys.argv[2].startswith('deployment/')\n"
        "    print(json.dumps({'spec': {'replicas': 1}} if deployment else {'kind': 'List', 'items': []}))\n"
        "    sys.exit(0)\n"
        f"open({str(marker)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print('done')\n"
    )
    program.chmod(0o755)
    return program, marker


def corpus(sentinel: Path) -> list[str]:
    """Hostile label values: shell metacharacters (each would create `sentinel`), paths, sizes, odd text."""
    return [
        f"; touch {sentinel}",
        "; rm -rf /",
        f"$(touch {sentinel})",
        f"`touch {sentinel}`",
        f"0\ntouch {sentinel}",
        f"0 && touch {sentinel}",
        f"| touch {sentinel}",
        "../../etc/passwd",
        "x" * 10_000,
        "GPU-é\u202e日本",
        "٣",
        "0\x00",
        '0"} or vector(1) #',
        "--kubeconfig=/tmp/evil",
        "-rf",
        "",
    ]
