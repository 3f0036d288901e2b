"""Discovery against a real vLLM CPU server with --data-parallel-size 2, started and stopped here.

The server (`VLLM::APIServer_0/1` on the API port, `VLLM::EngineCore_DP0/1`, one `VLLM::Worker` per rank
with 13 gloo/ZMQ/TCPStore listeners each) is the tree captured in vllm-0.32-cpu-dp2-processes.txt. No
GPU here: NVML's view is given as a GPU directory listing each rank's worker on its own GPU, as NVML
lists a compute process. Connections are counted twice: every `connect` this process makes during the
cycle (the socket layer under the scraper), and the kernel's sockets towards the internal ports that
appeared meanwhile and are not vLLM's own (a closed connection stays in TIME-WAIT for a minute).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servescope.core.exposition import ExpositionParser
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.normalise import normalise
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import Scraper
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import OWN_VLLM_SERVERS, OWN_VLLM_SKIP_REASON, SHARED, values

SETUP = SHARED / "tools" / "real-vllm" / "setup.sh"
VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope" / "vllm-venv"
PORT = int(os.environ.get("SERVESCOPE_TEST_VLLM_DP2_PORT", "18118"))
# Two engine cores on 2 shared CPU cores took 5-6 minutes to be healthy here; setup.sh gives up waiting
# after 300 s and leaves the server starting, so this waits on until START_SECONDS in all.
START_SECONDS = 720
STOP_SECONDS = 60
GPU_A, GPU_B = "GPU-dp-rank-0", "GPU-dp-rank-1"
pytestmark = [
    pytest.mark.real_vllm,
    pytest.mark.skipif(not OWN_VLLM_SERVERS, reason=OWN_VLLM_SKIP_REASON),
    pytest.mark.skipif(not SETUP.exists(), reason=f"no {SETUP}: the real-vLLM setup script is not here"),
    pytest.mark.skipif(
        not (VENV / "bin" / "vllm").exists(), reason=f"no vLLM venv at {VENV}: run setup.sh once to build it"
    ),
]


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(pgid: int) -> None:
    """SIGTERM to the server's process group (setup.sh starts it with setsid), SIGKILL after a grace."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if _port_in_use(PORT):
        pytest.skip(f"port {PORT} is taken: set SERVESCOPE_TEST_VLLM_DP2_PORT to a free one")
    run = tmp_path_factory.mktemp("vllm-dp2")
    pidfile, log = run / "vllm.pid", run / "vllm.log"
    env = {
        **os.environ,
        "PIDFILE": str(pidfile),
        "LOG": str(log),
        "EXTRA_ARGS": "--enforce-eager --data-parallel-size 2",
    }
    deadline = time.monotonic() + START_SECONDS
    try:
        started = subprocess.run(
            ["bash", str(SETUP), "", "", str(PORT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            check=False,
        )
        failure = None if started.returncode == 0 else started.stdout[-2000:] + started.stderr[-2000:]
    except subprocess.TimeoutExpired:
        failure = f"setup.sh still running after {START_SECONDS} s"
    pgid = int(pidfile.read_text()) if pidfile.exists() else None
    try:
        if failure is not None and pgid is not None and _group_alive(pgid):
            failure = _healthy_by(deadline, failure)
        if failure is not None:
            tail = log.read_text()[-3000:] if log.exists() else "(no log)"
            pytest.fail(f"the DP=2 vLLM server did not start: {failure}\nlog:\n{tail}")
        yield f"http://127.0.0.1:{PORT}"
    finally:
        if pgid is not None:
            _stop(pgid)


def _healthy_by(deadline: float, failure: str) -> str | None:
    """None once the server answers /health before `deadline`, else why not."""
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{PORT}/health", timeout=5).status_code == 200:
                return None
        time.sleep(2)
    return f"{failure} (and not healthy after {START_SECONDS} s in all)"


def _titles(procfs: ProcFs, pids: set[int]) -> dict[int, str]:
    return {pid: (procfs.cmdline(pid) or [""])[0] for pid in pids}


def _rank_workers(procfs: ProcFs, titles: dict[int, str]) -> dict[str, set[int]]:
    """Each rank's VLLM::Worker processes: the descendants of its VLLM::EngineCore_DP<n>."""
    ranks = {}
    for pid, title in titles.items():
        found = re.fullmatch(r"VLLM::EngineCore_DP(\d+)", title)
        if found:
            below = procfs.descendants({pid}) - {pid}
            ranks[found.group(1)] = {p for p in below if titles.get(p, "").startswith("VLLM::Worker")}
    return ranks


def _internal_ports(procfs: ProcFs, titles: dict[int, str]) -> set[int]:
    ports = set()
    for pid, title in titles.items():
        if title.startswith(("VLLM::Worker", "VLLM::EngineCore")):
            listeners = procfs.listeners(pid)
            ports |= {listeners[i].port for i in procfs.socket_inodes(pid) & listeners.keys()}
    return ports


def _kernel_sockets_to(ports: set[int]) -> set[tuple[str, str, str, str]]:
    """(state, local, peer, owner pids) of every TCP socket whose peer port is one of `ports`."""
    listing = subprocess.run(["ss", "-tanpH"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = set()
    for line in listing.splitlines():
        fields = line.split()
        if (
            len(fields) >= 5
            and fields[4].rsplit(":", 1)[-1].isdigit()
            and int(fields[4].rsplit(":", 1)[1]) in ports
        ):
            owners = ",".join(sorted(re.findall(r"pid=(\d+)", line)))
            found.add((fields[0], fields[3], fields[4], owners))
    return found


class Connections:
    """Every address this process connects a socket to while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[Any] = []
        connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

        def recording_connect(sock: socket.socket, address: Any) -> None:
            self.seen.append(address)
            connect(sock, address)

        def recording_connect_ex(sock: socket.socket, address: Any) -> int:
            self.seen.append(address)
            return connect_ex(sock, address)

        monkeypatch.setattr(socket.socket, "connect", recording_connect)
        monkeypatch.setattr(socket.socket, "connect_ex", recording_connect_ex)

    def ports(self) -> set[int]:
        return {address[1] for address in self.seen if isinstance(address, tuple)}


def _one_cycle(procfs: ProcFs, directory: GpuDirectory) -> tuple[list[Any], list[str]]:
    source = VllmSource([], directory=directory, procfs=procfs, scraper=Scraper(2.0))
    try:
        collection = source.collect()
    finally:
        source.close()
    return collection.samples, [p.reason for p in collection.problems]


def _directory(processes: dict[str, set[int]]) -> GpuDirectory:
    directory = GpuDirectory()
    directory.update({"0": GPU_A, "1": GPU_B})
    for uuid, pids in processes.items():
        directory.set_processes(uuid, frozenset(pids))
    return directory


def test_one_cycle_finds_the_api_port_and_connects_to_no_internal_port(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    procfs = ProcFs()
    tree = procfs.descendants(procfs.listening_pids(PORT))
    titles = _titles(procfs, tree)
    ranks = _rank_workers(procfs, titles)
    assert set(ranks) == {"0", "1"} and all(ranks.values()), titles
    internal = _internal_ports(procfs, titles)
    assert len(internal) >= 20, f"expected the workers' gloo/ZMQ/TCPStore listeners, found {sorted(internal)}"
    directory = _directory({GPU_A: ranks["0"], GPU_B: ranks["1"]})
    before = _kernel_sockets_to(internal)
    connections = Connections(monkeypatch)
    samples, problems = _one_cycle(procfs, directory)
    monkeypatch.undo()
    appeared = _kernel_sockets_to(internal) - before
    assert connections.ports() == {PORT}, (
        f"connected to {sorted(connections.ports())}; internal {sorted(internal)}"
    )
    ours = {s for s in appeared if not s[3] or not set(s[3].split(",")) <= {str(p) for p in tree}}
    assert ours == set(), f"sockets towards internal ports not vLLM's own: {sorted(ours)}"
    assert values(samples, "servescope_vllm_discovered_endpoints") == [1]
    assert values(samples, "servescope_source_up", source="vllm", endpoint=f"{server}/metrics") == [1]
    # Each rank on its own GPU, not both engines on both GPUs.
    pairs = {
        (dict(zip(s.spec.labels, s.label_values, strict=True))["engine"], s.label_values[3])
        for s in samples
        if s.spec.name == "servescope_engine_gpu_info"
    }
    assert pairs == {("0", GPU_A), ("1", GPU_B)}
    assert "ambiguous_dp" not in problems


def test_ranks_nvml_lists_on_one_gpu_give_no_engine_gpu_mapping(server: str) -> None:
    procfs = ProcFs()
    titles = _titles(procfs, procfs.descendants(procfs.listening_pids(PORT)))
    ranks = _rank_workers(procfs, titles)
    samples, problems = _one_cycle(procfs, _directory({GPU_A: ranks["0"] | ranks["1"]}))
    assert values(samples, "servescope_source_up", source="vllm", endpoint=f"{server}/metrics") == [1]
    assert [s for s in samples if s.spec.name == "servescope_engine_gpu_info"] == []
    assert "ambiguous_dp" in problems


def test_without_gpu_processes_nothing_is_probed(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU on this machine: NVML lists no compute process, and discovery starts from those only.
    connections = Connections(monkeypatch)
    samples, _ = _one_cycle(ProcFs(), _directory({}))
    monkeypatch.undo()
    assert PORT not in connections.ports()
    assert values(samples, "servescope_vllm_discovered_endpoints") == [0]


def test_the_dp2_exposition_is_parsed_into_two_engines(server: str) -> None:
    text = httpx.get(f"{server}/metrics", timeout=10).text
    normalised = normalise(ExpositionParser().parse(text, keep=is_engine_family))
    assert sorted(engine for _, engine in normalised.engines) == ["0", "1"]
    # Before the first request vLLM has not set its gauges: the engines are known from their counters.
    assert all(e.histograms for e in normalised.engines.values())
