"""Discovery against the real vLLM CPU server (CI starts one): the API port found in one cycle, not a
single request sent to a worker's or engine core's listeners."""

from __future__ import annotations

from urllib.parse import urlsplit

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import Scraper
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import NEEDS_SHARED_VLLM, VLLM_URL, values

pytestmark = NEEDS_SHARED_VLLM


class Recording(Scraper):
    """The real scraper, noting every URL it is sent to."""

    def __init__(self) -> None:
        super().__init__(2.0)
        self.fetched: list[str] = []

    def fetch(self, url: str) -> str:
        self.fetched.append(url)
        return super().fetch(url)


def internal_ports(procfs: ProcFs, pids: set[int]) -> set[int]:
    ports = set()
    for pid in pids:
        listeners = procfs.listeners(pid)
        ports |= {listeners[i].port for i in procfs.socket_inodes(pid) & listeners.keys()}
    return ports


def test_discovery_finds_the_api_port_and_sends_nothing_to_internal_ports() -> None:
    procfs, port = ProcFs(), urlsplit(VLLM_URL).port
    assert port is not None
    tree = procfs.descendants(procfs.listening_pids(port))
    titles = {pid: (procfs.cmdline(pid) or [""])[0] for pid in tree}
    workers = {pid for pid, title in titles.items() if title.startswith("VLLM::Worker")}
    internal = {
        pid for pid, title in titles.items() if title.startswith(("VLLM::Worker", "VLLM::EngineCore"))
    }
    assert workers, f"no VLLM::Worker below the server on port {port}: {titles}"
    directory = GpuDirectory()
    directory.update({"0": "GPU-real-vllm"})
    directory.set_processes("GPU-real-vllm", frozenset(workers))  # as NVML lists the workers on a GPU
    scraper = Recording()
    source = VllmSource([], directory=directory, procfs=procfs, scraper=scraper)
    try:
        samples = source.collect().samples
    finally:
        source.close()
    probed = {urlsplit(url).port or 0 for url in scraper.fetched}
    assert probed == {port}, (
        f"probed {sorted(probed)}; internal listeners {sorted(internal_ports(procfs, internal))}"
    )
    assert values(samples, "servescope_vllm_discovered_endpoints") == [1]
    assert values(samples, "servescope_source_up", source="vllm", endpoint=f"{VLLM_URL}/metrics") == [1]
