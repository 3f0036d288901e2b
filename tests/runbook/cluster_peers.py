"""What the cluster tests of the runbook service start: processes inside network-namespace pods, a
round-robin "Service" in front of pods, and a real Prometheus scraping them.

Every process logs to a file (never an undrained pipe) and is stopped, with its namespace, whatever
the test does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path
from typing import Any

import httpx

from servescope.core.processes import free_port, stop_process
from tests.faults.runbook_peers import accept_each
from tests.k8s.netns import linked, pod_namespace
from tests.runbook.kube_fakes import ACCOUNT, TOKEN
from tests.support import SERVESCOPE

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def started(argv: list[str], log: Path, announced: str, timeout: float = 40.0) -> Iterator[re.Match[str]]:
    """`argv` (already wrapped in `ip netns exec` where it must be) with stdout and stderr in `log`;
    yields the first match of `announced` in its log, then stops it (SIGTERM, SIGKILL after 10 s)."""
    handle = log.open("w")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + timeout
        while (found := re.search(announced, log.read_text(errors="replace"))) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{argv[:6]} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield found
    finally:
        stop_process(process, 10)
        handle.close()


def in_pod(pod_name: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", pod_name, *argv]


@contextmanager
def round_robin_service(backends: list[tuple[str, int]]) -> Iterator[int]:
    """A TCP proxy on 127.0.0.1 handing each new connection to the next backend in turn, as a
    Kubernetes Service does across its endpoints; its port."""
    # Its three small loops are closures over the listener and the stop flag: kept together.
    listener = socket.create_server(("127.0.0.1", 0))
    turn = cycle(backends)
    stop = threading.Event()

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def relay(client: socket.socket, upstream: socket.socket) -> None:
        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join(30)
        client.close()
        upstream.close()

    def forward(client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(next(turn), timeout=5)
        except OSError:
            client.close()
            return
        relay(client, upstream)

    threading.Thread(target=accept_each, args=(listener, stop, forward), daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


PROMETHEUS_CONFIG = """global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
- job_name: servescope
  static_configs:
{targets}
"""


@contextmanager
def prometheus(folder: Path, targets: dict[str, str]) -> Iterator[str]:
    """A real Prometheus scraping `targets` (address -> the node name it sets as `instance`, as the
    ServiceMonitor's relabelling does); its URL, once every target is up."""
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus is not installed (make test installs it)"
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(
        f"  - targets: ['{address}']\n    labels: {{instance: {node}}}\n" for address, node in targets.items()
    )
    config = folder / "prometheus.yml"
    config.write_text(PROMETHEUS_CONFIG.format(targets=lines))
    port = free_port()
    argv = [
        binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    with started(argv, folder / "prometheus.log", r"", timeout=5):
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with suppress(httpx.HTTPError, KeyError, ValueError):
                active = httpx.get(f"{url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
                if len(active) == len(targets) and all(t["health"] == "up" for t in active):
                    yield url
                    return
            time.sleep(0.5)
        raise AssertionError(
            f"Prometheus never had every target up: {(folder / 'prometheus.log').read_text()[-2000:]}"
        )


def servescope_in(pod_name: str, *args: str) -> list[str]:
    return in_pod(pod_name, SERVESCOPE, *args)


@dataclass(frozen=True)
class Pods:
    """The runbook service and the fake API server in their pods, as the host reaches them."""

    runbooks: str  # the runbook service's URL
    api: str  # the API server's URL
    requests: Path  # the API server's request log (JSON Lines)
    audit: Path  # the runbook service's audit trail


@contextmanager
def api_and_runbook_pods(
    folder: Path, rbac: str, objects: list[dict[str, Any]], change_token: str, *server_args: str
) -> Iterator[Pods]:
    """The fake Kubernetes API server (`rbac`: rendered manifests; `objects`) in one pod and
    `runbook-server *server_args` in another, reaching it over a veth with the ServiceAccount's token;
    on-call's change token is `change_token`."""
    requests = folder / "api-requests.jsonl"
    config = {"rbac": rbac, "tokens": {TOKEN: list(ACCOUNT)}, "objects": objects, "log": str(requests)}
    (folder / "api.json").write_text(json.dumps(config))
    (folder / "sa-token").write_text(TOKEN)
    tokens = folder / "tokens"
    tokens.write_text(f"on-call:{change_token}\n")
    tokens.chmod(0o600)
    with ExitStack() as stack:
        api_pod = stack.enter_context(pod_namespace(0))
        runbook_pod = stack.enter_context(pod_namespace(1))
        api_address, _ = stack.enter_context(linked(api_pod, runbook_pod, 0))
        argv = in_pod(
            api_pod.name, sys.executable, "-m", "tests.support.kube", str(folder / "api.json"), "0.0.0.0:0"
        )
        api = stack.enter_context(started(argv, folder / "api.log", r"serving on \S+:(\d+)"))
        argv = servescope_in(
            runbook_pod.name, "runbook-server", "--listen", "0.0.0.0:0", "--token-file", str(tokens),
            "--kube-api-url", f"http://{api_address}:{api.group(1)}",
            "--kube-token-file", str(folder / "sa-token"), "--audit-log", str(folder / "audit.jsonl"),
            "--incidents-db", str(folder / "incidents.sqlite"), *server_args,
        )  # fmt: skip
        found = stack.enter_context(started(argv, folder / "runbooks.log", r"runbook server on \S+:(\d+)"))
        yield Pods(
            f"http://{runbook_pod.address}:{found.group(1)}",
            f"http://{api_pod.address}:{api.group(1)}",
            requests,
            folder / "audit.jsonl",
        )
