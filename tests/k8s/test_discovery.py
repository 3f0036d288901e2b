"""Discovery probes only API servers, in the engine's own network namespace (fixture /proc trees)."""

from __future__ import annotations

from pathlib import Path

from servescope.core.exposition import parse_exposition
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.discovery import Role, classify
from servescope.exporter.vllm.normalise import normalise
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values
from tests.k8s.procfs_tree import (
    API_PORT,
    ROOT_PID,
    WORKERS,
    Netns,
    ProcTree,
    dp2_capture,
    dp2_tree,
    reachable,
    settled,
)

DP2_METRICS = SAMPLES / "vllm-0.32-cpu-dp2.txt"


def gpus_of_workers() -> GpuDirectory:
    directory = GpuDirectory()
    directory.update({"0": "GPU-a", "1": "GPU-b"})
    directory.set_processes("GPU-a", frozenset({WORKERS["0"]}))
    directory.set_processes("GPU-b", frozenset({WORKERS["1"]}))
    return directory


def test_the_capture_has_worker_listeners_to_stay_away_from() -> None:
    processes, listening = dp2_capture()
    titles = {p.pid: p.title for p in processes}
    worker_ports = {
        port for pid, held in listening.items() if titles.get(pid) == "VLLM::Worker" for port, _ in held
    }
    assert len(worker_ports) == 26 and API_PORT not in worker_ports
    assert {pid for pid, held in listening.items() if (API_PORT, 3) in held} == {ROOT_PID, 9506, 9507}


def test_titles_classify_api_servers_and_internals(tmp_path: Path) -> None:
    procfs = ProcFs(dp2_tree(tmp_path / "proc").root)
    roles = {
        pid: classify(procfs, pid).role for pid in (ROOT_PID, 9473, 9504, 9505, 9506, 9507, 9591, 9579, 9472)
    }
    assert roles == {
        ROOT_PID: Role.API, 9506: Role.API, 9507: Role.API, 9472: Role.OTHER,
        9473: Role.INTERNAL, 9504: Role.INTERNAL, 9505: Role.INTERNAL, 9591: Role.INTERNAL,
        9579: Role.INTERNAL,
    }  # fmt: skip
    assert classify(procfs, ROOT_PID).port == API_PORT


def test_only_the_api_port_is_a_candidate_with_or_without_port_flag(tmp_path: Path) -> None:
    for flag in (True, False):
        procfs = ProcFs(dp2_tree(tmp_path / f"proc-{flag}", with_port_flag=flag).root)
        found = settled(procfs, gpus_of_workers())
        assert found.urls == [f"http://127.0.0.1:{API_PORT}/metrics"], flag
        assert found.owners[found.urls[0]] == {ROOT_PID, 9506, 9507, *WORKERS.values()}
        assert found.reports() == []


class RecordingScraper:
    """Answers the API port with the captured DP=2 exposition and records every URL it was sent to."""

    def __init__(self) -> None:
        self.fetched: list[str] = []
        self.text = DP2_METRICS.read_text()

    def fetch(self, url: str) -> str:
        self.fetched.append(url)
        return self.text

    def close(self) -> None:
        pass


def test_a_discovery_cycle_sends_nothing_to_worker_ports(tmp_path: Path) -> None:
    scraper = RecordingScraper()
    source = VllmSource(
        [],
        directory=gpus_of_workers(),
        procfs=ProcFs(dp2_tree(tmp_path / "proc").root),
        scraper=scraper,
        connect=reachable,
    )  # type: ignore[arg-type]
    samples = source.collect().samples
    source.close()
    assert set(scraper.fetched) == {f"http://127.0.0.1:{API_PORT}/metrics"}  # discovery probe + scrape
    assert values(samples, "servescope_vllm_discovered_endpoints") == [1]


def test_the_dp2_exposition_is_two_engines() -> None:
    normalised = normalise(parse_exposition(DP2_METRICS.read_text(), keep=is_engine_family))
    assert sorted(normalised.engines) == [("tiny-llm", "0"), ("tiny-llm", "1")]


def test_an_engine_in_another_pod_is_scraped_at_the_pod_address(tmp_path: Path) -> None:
    pod = Netns("net:[4026532999]", ["198.18.4.7"])
    found = settled(ProcFs(dp2_tree(tmp_path / "proc", pod=pod, api_bind="0.0.0.0").root), gpus_of_workers())
    assert found.urls == [f"http://198.18.4.7:{API_PORT}/metrics"]


def test_an_engine_on_its_pod_loopback_only_is_reported(tmp_path: Path) -> None:
    pod = Netns("net:[4026532999]", ["198.18.4.7"])
    found = settled(ProcFs(dp2_tree(tmp_path / "proc", pod=pod).root), gpus_of_workers())
    assert found.urls == []
    ((reason, what),) = found.reports()  # one listener, held by the root and both API servers
    assert reason == "loopback_only"
    where = f"network namespace net:[4026532999] listens on 127.0.0.1:{API_PORT}"
    assert what == f"pid {ROOT_PID}, 9506, 9507 in {where} only"


def test_the_source_counts_loopback_only_once_a_discovery_cycle(tmp_path: Path) -> None:
    pod = Netns("net:[4026532999]", ["198.18.4.7"])
    procfs = ProcFs(dp2_tree(tmp_path / "proc", pod=pod).root)
    scraper = RecordingScraper()
    source = VllmSource([], directory=gpus_of_workers(), procfs=procfs, scraper=scraper, connect=reachable)  # type: ignore[arg-type]
    first, second = source.collect(), source.collect()
    source.close()
    assert [p.reason for p in first.problems] == ["loopback_only"] and second.problems == []
    assert values(first.samples, "servescope_vllm_discovered_endpoints") == [0]
    assert scraper.fetched == []  # nothing reachable, nothing sent


def test_two_servers_started_from_one_shell_keep_their_own_gpus(tmp_path: Path) -> None:
    own = Netns("net:[1]", [], [("0.0.0.0", 8000, 801), ("0.0.0.0", 8001, 802)])
    tree = ProcTree(tmp_path / "proc", own)
    tree.process(50, 1, "bash")
    for root, inode in ((100, 801), (200, 802)):
        tree.process(root, 50, "python3", argv=("/v/bin/vllm", "serve", "m"), sockets=(inode,), comm="vllm")
        tree.process(root + 1, root, "VLLM::EngineCore")
        tree.process(root + 2, root + 1, "VLLM::Worker")
    d = GpuDirectory()
    d.update({"0": "GPU-a", "1": "GPU-b"})
    d.set_processes("GPU-a", frozenset({102}))
    d.set_processes("GPU-b", frozenset({202}))
    found = settled(ProcFs(tree.root), d)
    assert found.owners == {
        "http://127.0.0.1:8000/metrics": {100, 102},
        "http://127.0.0.1:8001/metrics": {200, 202},
    }
