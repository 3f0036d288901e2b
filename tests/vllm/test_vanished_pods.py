"""An endpoint whose pod is gone goes at once; one whose pod stays (a crash loop) stays down.

The kubelet's pod-resources answer is the truth: a pod it no longer lists was deleted (a rollout, a
scale-down, a move to another node), and reporting its engine down would page for a planned change. A
crash-looping container keeps its pod and GPUs: its engine stays reported down, past the 900 s grace
that only applies where no pod is known.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm import finding, retention
from servescope.exporter.vllm import source as source_module
from servescope.exporter.vllm.discovery import Discovery
from servescope.exporter.vllm.join import EndpointGpus
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.retention import GRACE_SECONDS, Lost
from servescope.exporter.vllm.scrape import ScrapeError
from servescope.exporter.vllm.source import DISCOVERY_SECONDS, VllmSource
from tests.helpers import SAMPLES, FakeClock, values

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
OLD, NEW = "http://10.1.0.5:8000/metrics", "http://10.1.0.9:8000/metrics"
GPU = GpuProcess("0", "GPU-0000", 4101)
POD = ("serving", "llama-7d9f-abcde")


class Engines:
    """The engines the scraper reaches: each URL in `alive` answers its page, any other refuses."""

    def __init__(self) -> None:
        self.alive = {OLD}

    def fetch(self, url: str) -> str:
        pages = dict.fromkeys(self.alive, GOOD)
        if url in pages:
            return pages[url]
        raise ScrapeError("connect", f"{url}: connection refused")

    def close(self) -> None:
        pass


@dataclass
class Node:
    source: VllmSource
    engines: Engines
    listening: list[str]
    directory: GpuDirectory
    clocks: tuple[FakeClock, FakeClock]

    def advance(self, seconds: float) -> None:
        for clock in self.clocks:
            clock.advance(seconds)

    def up(self, url: str = OLD) -> list[float]:
        return values(self.source.collect().samples, "servescope_source_up", source="vllm", endpoint=url)

    def pods(self, *pods: tuple[str, str]) -> None:
        """The kubelet's answer: these pods hold GPU 0 (none: the pod was deleted)."""
        holders = frozenset((ns, pod, "vllm") for ns, pod in pods)
        self.directory.set_holders({GPU.uuid: holders} if holders else {})

    def engine_gone(self) -> None:
        """The engine's process exited: it answers nothing, and discovery no longer finds it."""
        self.engines.alive.discard(OLD)
        self.listening.remove(OLD)
        self.advance(DISCOVERY_SECONDS + 1)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    listening = [OLD]
    monkeypatch.setattr(
        finding, "discover", lambda *args: Discovery(owners={url: set() for url in listening})
    )
    # The join of every endpoint finds GPU 0 (the procfs walk is tested in test_join.py).
    monkeypatch.setattr(source_module, "join_endpoint", lambda *args: EndpointGpus([GPU]))
    directory, engines, mono, wall = GpuDirectory(), Engines(), FakeClock(), FakeClock(1.7e9)
    source = VllmSource(
        [],
        directory=directory,
        procfs=ProcFs(tmp_path),
        scraper=engines,
        monotonic=mono,
        wall=wall,  # type: ignore[arg-type]
    )
    node = Node(source, engines, listening, directory, (mono, wall))
    node.pods(POD)
    assert node.up() == [1]  # scraped once: its pod is known
    yield node
    source.close()


def test_an_engine_whose_pod_is_deleted_is_dropped_at_once(node: Node) -> None:
    node.pods()  # deleted: the kubelet lists it no more
    node.engine_gone()
    assert node.source.endpoints() == []
    assert node.up() == []  # no series at all: nothing says down


def test_a_crash_looping_engine_whose_pod_stays_is_down_past_the_grace(node: Node) -> None:
    node.engine_gone()
    assert node.up() == [0]
    node.advance(GRACE_SECONDS + DISCOVERY_SECONDS)  # the pod and its GPUs are still there
    assert node.up() == [0]
    node.pods()  # someone deletes the failing pod: that ends it
    node.advance(DISCOVERY_SECONDS + 1)
    assert node.up() == []


def test_a_pod_still_terminating_is_down_until_the_kubelet_lets_it_go(node: Node) -> None:
    node.engine_gone()
    assert node.up() == [0]  # the kubelet still lists the terminating pod
    node.pods()
    node.advance(DISCOVERY_SECONDS + 1)
    assert node.up() == []


def test_a_pod_recreated_under_its_name_at_a_new_address_drops_the_old_one(node: Node) -> None:
    node.engine_gone()
    node.engines.alive.add(NEW)
    node.listening.append(NEW)  # a StatefulSet's pod, recreated: same name, new IP
    node.advance(DISCOVERY_SECONDS + 1)
    node.up(NEW)  # scraped: its pod is known
    node.advance(DISCOVERY_SECONDS + 1)
    assert node.source.endpoints() == [NEW]


def test_without_the_kubelet_a_lost_engine_keeps_the_grace(node: Node) -> None:
    node.directory.set_holders({}, listed=False)  # the kubelet did not answer: nothing is known
    node.engine_gone()
    assert node.up() == [0]
    node.advance(GRACE_SECONDS)
    assert node.up() == []


@pytest.mark.parametrize(
    ("lost", "listed", "serving", "kept"),
    [
        (Lost(OLD, 1.0, POD), frozenset({POD}), set(), True),
        (Lost(OLD, 1.0, POD), frozenset(), set(), False),
        (Lost(OLD, 1.0, POD), frozenset({POD}), {POD}, False),
        (Lost(OLD, 1.0, POD), None, set(), True),  # unknown: the grace from the last success
        (Lost(OLD, 0.0, None), None, set(), False),  # never answered: nothing to keep
        (Lost(OLD, 1.0, None), frozenset(), set(), True),  # no pod named (a shared GPU): the grace
    ],
)
def test_retention(
    lost: Lost, listed: frozenset[tuple[str, str]] | None, serving: set[tuple[str, str]], kept: bool
) -> None:
    assert retention.kept(lost, 100.0, listed, serving) is kept
    assert retention.kept(lost, 1.0 + GRACE_SECONDS, None, serving) is False
