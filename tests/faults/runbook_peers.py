"""Hostile peers and clients of the runbook service, and a real `servescope runbook-server` to face them.

Every peer is a real loopback server (raw sockets: it may break HTTP's rules on purpose); every figure
is read from the server process itself (/proc/<pid>/status, /proc/<pid>/fd).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from servescope.core.processes import stop_process
from tests.runbook.fakes import step, write_runbook
from tests.runbook.kube_fakes import Cluster
from tests.support import SERVESCOPE, STARTUP_S
from tests.support.servers import RUNBOOK_LISTENING, announced_base

ALERT = "FaultAlert"
TOKEN = "change-token-for-faults"
WEBHOOK_TOKEN = "webhook-token-for-faults"


@dataclass
class RunbookServer:
    base: str
    process: subprocess.Popen[str]
    folder: Path
    log: list[str] = field(default_factory=list)

    def vm_hwm_kib(self) -> int:
        """The process's peak resident set (VmHWM), KiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"VmHWM:\s+(\d+) kB", status)
        assert found is not None
        return int(found.group(1))

    def fds(self) -> int:
        return sum(1 for _ in Path(f"/proc/{self.process.pid}/fd").iterdir())

    def audit(self) -> list[dict[str, object]]:
        path = self.folder / "audit.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fault_runbooks(folder: Path) -> Path:
    """One runbook: a read step of the exporter (by gpu) and a change step (cordon, by node)."""
    steps = step("snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"') + step(
        "cordon", "change", "cordon_node", 'node: "{{ labels.node }}"'
    )
    write_runbook(folder, ALERT, steps=steps)
    return folder


def secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@contextmanager
def runbook_server(
    folder: Path, *args: str, kube: Cluster | None = None, token_mode: int = 0o600
) -> Iterator[RunbookServer]:
    """`servescope runbook-server` on a free loopback port over `fault_runbooks`, tokens in files
    (`token_mode`, 0600 unless told)."""
    folder.mkdir(parents=True, exist_ok=True)
    runbooks = fault_runbooks(folder / "runbooks")
    argv = [
        SERVESCOPE, "runbook-server", "--listen", "127.0.0.1:0", "--runbooks", str(runbooks),
        "--token-file", str(secret(folder / "token", TOKEN, token_mode)),
        "--webhook-token-file", str(secret(folder / "webhook-token", WEBHOOK_TOKEN)),
        "--audit-log", str(folder / "audit.jsonl"), "--incidents-db", str(folder / "incidents.sqlite"),
        # Without a cluster the API is an address nothing answers at: no test acts on a real one.
        "--kube-api-url", kube.url if kube else "http://127.0.0.1:1",
        *(["--kube-token-file", str(kube.token_file)] if kube else []), *args,
    ]  # fmt: skip
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    base = announced_base(process, RUNBOOK_LISTENING, time.monotonic() + STARTUP_S)
    if base is None:
        process.kill()
        raise AssertionError(f"the runbook server did not start: {process.communicate()[1]}")
    try:
        yield RunbookServer(base, process, folder)
    finally:
        stop_process(process, 10)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@dataclass
class Peer:
    """A raw loopback HTTP peer: its address and how many connections it was sent."""

    host: str
    port: int
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"


def _endless(conn: socket.socket, stop: threading.Event) -> None:
    blob = b"# " + b"x" * 65_000 + b"\n"
    chunk = b"%x\r\n" % len(blob) + blob + b"\r\n"
    conn.sendall(_HEAD)
    while not stop.is_set():
        conn.sendall(chunk)


def _trickle(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(_HEAD)
    while not stop.wait(1.5):
        conn.sendall(b"1\r\n#\r\n")


def _prometheus(instances: list[str]) -> bytes:
    """One answer for every question: an instant query's `up` rows and /api/v1/targets' active targets."""
    rows = [{"metric": {"instance": i, "job": "servescope"}, "value": [0, "1"]} for i in instances]
    targets = [
        {"labels": {"instance": i, "job": "servescope"}, "scrapeUrl": f"http://{i}/metrics", "health": "up"}
        for i in instances
    ]
    data = {"resultType": "vector", "result": rows, "activeTargets": targets}
    body = json.dumps({"status": "success", "data": data}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def accept_each(
    listener: socket.socket, stop: threading.Event, handle: Callable[[socket.socket], None]
) -> None:
    """Hand each connection to `handle` on a thread of its own, until `stop` or the listener closes."""
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


_TRICKLED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Padding: " + b"x" * 10_000


def _answer(mode: str, conn: socket.socket, stop: threading.Event, answer: bytes, delay: list[float]) -> None:
    if mode == "endless":
        _endless(conn, stop)
    elif mode == "trickle":
        _trickle(conn, stop)
    elif mode == "head-trickle":  # the response head itself, one byte a second
        for byte in _TRICKLED_HEAD:
            if stop.wait(1.0):
                return
            conn.sendall(bytes([byte]))
    elif not stop.wait(delay[0] if mode == "slow" else 0):
        conn.sendall(answer)


@contextmanager
def hostile_peer(
    mode: str, host: str = "127.0.0.1", port: int = 0, answer: bytes = b"", delay: list[float] | None = None
) -> Iterator[Peer]:
    """A peer that streams endlessly (`endless`), sends one body byte every 1.5 s (`trickle`) or its
    response head one byte a second (`head-trickle`), or sends `answer` and closes (`fixed`; `slow`: after
    `delay[0]` seconds, which the test may change while it runs); every connection is counted."""
    listener = socket.create_server((host, port))
    peer = Peer(host, listener.getsockname()[1])
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        peer.connections += 1
        with conn, suppress(OSError):
            conn.settimeout(30 if mode == "slow" else 5)
            conn.recv(65_536)
            _answer(mode, conn, stop, answer, delay or [0.0])

    threading.Thread(target=accept_each, args=(listener, stop, serve), daemon=True).start()
    try:
        yield peer
    finally:
        stop.set()
        listener.close()


@contextmanager
def fake_prometheus(instances: list[str]) -> Iterator[Peer]:
    """A Prometheus answering every instant query with `up{job="servescope"}` for these instances, and
    /api/v1/targets with them as the exporter job's active targets."""
    with hostile_peer("fixed", answer=_prometheus(instances)) as peer:
        yield peer


def run_step(
    base: str, step_id: str, labels: dict[str, str], *, execute: bool = False, token: str | None = None
) -> httpx.Response:
    """POST a step run, with the change token when one is given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{base}/runbooks/{ALERT}/steps/{step_id}/run",
        json={"labels": labels, "execute": execute},
        headers=headers,
        timeout=60,
    )


class ParallelRuns:
    """`count` read-step runs of `snapshot` in threads, started at once; `join()` waits for them."""

    def __init__(self, base: str, count: int) -> None:
        self.answers: list[httpx.Response] = []
        self._threads = [
            threading.Thread(target=lambda: self.answers.append(run_step(base, "snapshot", {"gpu": "0"})))
            for _ in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def join(self) -> list[httpx.Response]:
        for thread in self._threads:
            thread.join(60)
        return self.answers
