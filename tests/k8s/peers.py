"""What netns tests put in their pods: engines and other listeners that count what reaches them
(tests/k8s/listener.py), and the exporter over a fake NVML that names their PIDs (fake_nvml_serve.py)."""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import SAMPLES
from tests.k8s.netns import Pod
from tests.support import Served, start_child

ENGINE_PAGE = SAMPLES / "vllm-0.32-cpu-idle.txt"
# `--listen :0` is announced with the loopback URL a browser opens.
ANNOUNCED = r"metrics:\s+http://127\.0\.0\.1:(\d+)/metrics"


@dataclass
class Listener:
    pid: int
    port: int
    record: Path

    def counts(self) -> tuple[int, int]:
        """(connections accepted, bytes received) so far."""
        _, connections, received = self.record.read_text().split()
        return int(connections), int(received)


def listener_argv(
    record: Path, *, title: str, bind: str = "0.0.0.0", v6only: bool = False, page: bool = False
) -> str:
    """A shell command running tests/k8s/listener.py under the process title `title`."""
    args = [sys.executable, "-m", "tests.k8s.listener", "--bind", bind, "--record", str(record)]
    args += ["--v6only"] if v6only else []
    args += ["--metrics", str(ENGINE_PAGE)] if page else []
    return f"exec -a {shlex.quote(title)} {shlex.join(args)}"


def start_engine(pod: Pod, record: Path, *, bind: str = "0.0.0.0", v6only: bool = False) -> Listener:
    """An engine's API server in `pod` (titled as vLLM's), answering /metrics with a captured page."""
    command = listener_argv(record, title="VLLM::APIServer", bind=bind, v6only=v6only, page=True)
    process, port = pod.start(["bash", "-c", command], r"listening on (\d+)", "the engine")
    return Listener(process.pid, port, record)


def wait_recorded(*records: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(r.exists() for r in records):
        assert time.monotonic() < deadline, f"listeners did not start: {[str(r) for r in records]}"
        time.sleep(0.05)


def fake_nvml_exporter(
    gpu_pids: list[int], *serve: str, as_uid: int | None = None, timeout: float = 30.0
) -> Served:
    """The real exporter (`serve --listen :0 --no-dcgm`, dual-stack) whose NVML lists `gpu_pids`."""
    argv = [sys.executable, "-m", "tests.k8s.fake_nvml_serve", "--gpu-pids", ",".join(map(str, gpu_pids))]
    argv += ["--as-uid", str(as_uid)] if as_uid is not None else []
    argv += ["--", "--listen", ":0", "--no-dcgm", "--no-xid-events", "--hostname", "node-a", *serve]
    return start_child("exporter", argv, ANNOUNCED, timeout, cwd=Path(__file__).resolve().parents[2])
