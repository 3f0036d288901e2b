"""Every GPU process gets an outcome, and only engines' API servers are ever connected to (fixture /proc
trees; the probes' connects recorded, each answered as the network would)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.addresses import pod_addresses
from servescope.exporter.vllm.discovery import Discovery, discover
from servescope.exporter.vllm.finding import Finder
from servescope.exporter.vllm.probing import REFUSED, UNREACHABLE, settle
from servescope.exporter.vllm.procfs import ProcFs
from tests.k8s.procfs_tree import Netns, ProcTree

OWN = Netns("net:[1]", ["10.0.0.9"])
ETH0 = ("eth0", "198.18.8.0/30", "")


class Network:
    """Connects as scripted per host (default: open), recording every (host, port) asked."""

    def __init__(self, **answers: str) -> None:
        self.answers = {host.replace("_", "."): why for host, why in answers.items()}
        self.asked: list[tuple[str, int]] = []

    def connect(self, host: str, port: int) -> str | None:
        self.asked.append((host, port))
        return self.answers.get(host)


def gpus(*pids: int) -> GpuDirectory:
    directory = GpuDirectory()
    directory.update({str(i): f"GPU-{i}" for i in range(len(pids))})
    for i, pid in enumerate(pids):
        directory.set_processes(f"GPU-{i}", frozenset({pid}))
    return directory


def run(
    tree: ProcTree,
    directory: GpuDirectory,
    network: Network,
    answer: Callable[[str], str | None] | None = None,
) -> Discovery:
    found = discover(ProcFs(tree.root), directory)
    return settle(found, network.connect, answer or (lambda url: None))


def test_a_training_job_and_the_services_above_it_are_never_connected_to(tmp_path: Path) -> None:
    ns = Netns(
        "net:[7]", ["198.18.8.2"], [("0.0.0.0", 29500, 11), ("0.0.0.0", 41000, 12), ("0.0.0.0", 8080, 13)]
    )
    tree = ProcTree(tmp_path / "proc", OWN)
    tree.process(10, 1, "python3", argv=("-m", "http.server", "8080"), sockets=(13,), netns=ns)  # a service
    tree.process(20, 10, "torchrun", argv=("--nproc-per-node", "2", "train.py"), sockets=(11,), netns=ns)
    tree.process(21, 20, "python3", argv=("train.py", "--local-rank", "0"), sockets=(12,), netns=ns)
    tree.process(22, 20, "python3", argv=("train.py", "--local-rank", "1"), netns=ns)
    network = Network()
    found = run(tree, gpus(21, 22), network)
    assert network.asked == [] and found.urls == []
    assert found.tally() == {"not_an_engine": 2}
    assert found.reports() == []  # not an engine is no failure


def test_an_engine_under_a_shell_is_not_probed_through_the_shell(tmp_path: Path) -> None:
    ns = Netns("net:[7]", ["198.18.8.2"], [("0.0.0.0", 2222, 11)])
    tree = ProcTree(tmp_path / "proc", OWN)
    tree.process(10, 1, "bash", sockets=(11,), netns=ns)
    tree.process(11, 10, "VLLM::EngineCore", netns=ns)
    tree.process(12, 11, "VLLM::Worker", netns=ns)
    network = Network()
    found = run(tree, gpus(12), network)
    assert network.asked == [] and found.tally() == {"no_listener": 1}


def test_tgi_is_reached_through_its_router_and_a_named_server_through_its_pattern(tmp_path: Path) -> None:
    ns = Netns("net:[7]", ["198.18.8.2"], [("0.0.0.0", 3000, 11), ("0.0.0.0", 9000, 12)], [ETH0])
    tree = ProcTree(tmp_path / "proc", OWN)
    tree.process(10, 1, "text-generation-launcher", netns=ns)
    tree.process(11, 10, "text-generation-router", argv=("--port", "3000"), sockets=(11,), netns=ns)
    tree.process(12, 10, "/usr/bin/python3", argv=("text-generation-server", "serve"), netns=ns)
    tree.process(20, 1, "python3", argv=("my_server.py",), sockets=(12,), netns=ns)
    network = Network()
    procfs = ProcFs(tree.root)
    found = settle(discover(procfs, gpus(12, 20)), network.connect, lambda url: None)
    assert found.urls == ["http://198.18.8.2:3000/metrics"] and found.outcomes[20].reason == "not_an_engine"
    named = settle(
        discover(procfs, gpus(12, 20), patterns=[__import__("re").compile(r"my_server\.py")]),
        network.connect,
        lambda url: None,
    )
    assert named.urls == ["http://198.18.8.2:3000/metrics", "http://198.18.8.2:9000/metrics"]


def vllm_pod(tmp_path: Path, ns: Netns) -> ProcTree:
    tree = ProcTree(tmp_path / "proc", OWN)
    held = tuple(inode for _, _, inode in ns.listeners)
    tree.process(10, 1, "python3", argv=("/v/bin/vllm", "serve", "m"), sockets=held, netns=ns, comm="vllm")
    tree.process(11, 10, "VLLM::EngineCore", netns=ns)
    tree.process(12, 11, "VLLM::Worker", netns=ns)
    return tree


def test_a_multus_interface_at_a_lower_address_is_passed_over_for_the_default_route(tmp_path: Path) -> None:
    routes = [("eth0", "default", "198.18.8.1"), ETH0, ("net1", "198.18.0.0/30", "")]
    ns = Netns("net:[7]", ["198.18.0.2", "198.18.8.2"], [("0.0.0.0", 8000, 11)], routes)
    tree = vllm_pod(tmp_path, ns)
    assert pod_addresses(ProcFs(tree.root), 10).v4 == ["198.18.8.2", "198.18.0.2"]
    network = Network()
    found = run(tree, gpus(12), network)
    assert found.urls == ["http://198.18.8.2:8000/metrics"] and network.asked == [("198.18.8.2", 8000)]


def test_calicos_slash_32_on_eth0_comes_before_a_secondary_interface(tmp_path: Path) -> None:
    routes = [
        ("eth0", "default", "169.254.1.1"),
        ("eth0", "169.254.1.1/32", ""),
        ("net1", "192.168.1.0/24", ""),
    ]
    ns = Netns("net:[7]", ["10.4.0.7", "192.168.1.5"], [("0.0.0.0", 8000, 11)], routes)
    assert pod_addresses(ProcFs(vllm_pod(tmp_path, ns).root), 10).v4 == ["10.4.0.7", "192.168.1.5"]


def test_ipv6_addresses_come_from_if_inet6_without_link_local_or_tentative_ones(tmp_path: Path) -> None:
    v6 = [
        ("fe80::1", "eth0", 0x20, 0x80),  # link-local: not reachable from another link
        ("2001:2::9", "eth0", 0x00, 0xC0),  # tentative: duplicate address detection not done
        ("2001:2:0:1::2", "net1", 0x00, 0x80),
        ("2001:2::2", "eth0", 0x00, 0x80),
    ]
    ns = Netns("net:[7]", [], [("::", 8000, 11)], v6=v6, v6_default="eth0")
    assert pod_addresses(ProcFs(vllm_pod(tmp_path, ns).root), 10).v6 == ["2001:2::2", "2001:2:0:1::2"]


def v6_pod(tmp_path: Path, listeners: list[tuple[str, int, int]], v4: bool = True) -> ProcTree:
    ns = Netns("net:[7]", ["198.18.8.2"] if v4 else [], listeners, [ETH0] if v4 else [])
    ns.v6, ns.v6_default = [("2001:2::2", "eth0", 0, 0x80)], "eth0"
    return vllm_pod(tmp_path, ns)


def test_a_lone_ipv6_wildcard_is_tried_on_ipv6_first_and_reported_v6only_when_ipv4_is_refused(
    tmp_path: Path,
) -> None:
    tree = v6_pod(tmp_path, [("::", 8000, 11)])
    network = Network()
    assert run(tree, gpus(12), network).urls == ["http://[2001:2::2]:8000/metrics"]
    assert network.asked == [("2001:2::2", 8000)]
    blocked = Network(**{"2001:2::2": UNREACHABLE, "198_18_8_2": REFUSED})
    found = run(tree, gpus(12), blocked)
    assert blocked.asked == [("2001:2::2", 8000), ("198.18.8.2", 8000)]
    assert found.urls == [] and found.tally() == {"v6only_listener": 1}
    assert "IPV6_V6ONLY" in found.reports()[0][1]


def test_both_wildcards_on_one_port_are_one_endpoint_reached_on_ipv4_first(tmp_path: Path) -> None:
    tree = v6_pod(tmp_path, [("0.0.0.0", 8000, 11), ("::", 8000, 13)])
    found = run(tree, gpus(12), Network())
    assert found.urls == ["http://198.18.8.2:8000/metrics"]


def test_an_ipv6_only_pod_is_scraped_on_ipv6_or_reported_ipv6_only(tmp_path: Path) -> None:
    tree = v6_pod(tmp_path, [("::", 8000, 11)], v4=False)
    assert run(tree, gpus(12), Network()).urls == ["http://[2001:2::2]:8000/metrics"]
    found = run(tree, gpus(12), Network(**{"2001:2::2": UNREACHABLE}))
    assert found.tally() == {"ipv6_only": 1}


def test_an_ipv4_listener_in_an_ipv6_only_pod_has_no_reachable_address(tmp_path: Path) -> None:
    tree = v6_pod(tmp_path, [("0.0.0.0", 8000, 11)], v4=False)
    network = Network()
    found = run(tree, gpus(12), network)
    assert network.asked == [] and found.tally() == {"no_reachable_address": 1}
    assert "the pod has 2001:2::2" in found.reports()[0][1]


def test_an_address_that_connects_but_does_not_answer_metrics_is_not_metrics(tmp_path: Path) -> None:
    ns = Netns("net:[7]", ["198.18.8.2"], [("0.0.0.0", 8000, 11)], [ETH0])
    found = run(vllm_pod(tmp_path, ns), gpus(12), Network(), lambda url: "answered HTTP 404")
    assert found.tally() == {"not_metrics": 1}


def test_the_finder_says_the_node_is_blind_only_when_no_engine_answers(tmp_path: Path) -> None:
    ns = Netns("net:[7]", ["198.18.8.2"], [("127.0.0.1", 8000, 11)], [ETH0])
    tree = vllm_pod(tmp_path, ns)
    finder = Finder(ProcFs(tree.root), gpus(12), lambda url: None, Network().connect)
    finder.run(frozenset())
    assert finder.unready(any_up=False) == (
        "GPU processes run serving engines but none can be scraped from here: loopback_only"
    )
    assert finder.unready(any_up=True) is None
    assert [p.reason for p in finder.problems()] == ["loopback_only"] and finder.problems() == []
    report = finder.report()
    assert report["gpu_processes"] == {"loopback_only": 1}
    entries: list[dict[str, str]] = report["not_scraped"]  # type: ignore[assignment]
    [entry] = entries
    assert entry["reason"] == "loopback_only" and "127.0.0.1:8000" in entry["detail"]
