"""The engine-GPU join and discovery on fixture /proc trees (API server -> EngineCore -> Worker)."""

from __future__ import annotations

from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.join import gpus_of_endpoint
from servescope.exporter.vllm.procfs import ProcFs
from tests.k8s.procfs_tree import settled

TCP_HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)


def tcp_line(address: str, port: int, state: str, inode: int) -> str:
    return (
        f"   0: {address}:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000 "
        f"0 0 {inode} 1\n"
    )


def make_proc(root: Path, pid: int, ppid: int, name: str, sockets: tuple[int, ...] = ()) -> None:
    (root / str(pid) / "fd").mkdir(parents=True)
    (root / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194560\n")
    for fd, inode in enumerate(sockets, start=3):
        (root / str(pid) / "fd" / str(fd)).symlink_to(f"socket:[{inode}]")
    (root / str(pid) / "fd" / "0").symlink_to("/dev/null")


def vllm_tree(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(
        TCP_HEADER
        + tcp_line("00000000", 8000, "0A", 5555)  # vLLM API server on 0.0.0.0:8000
        + tcp_line("0100007F", 8000, "01", 5556)  # an established connection: not a listener
        + tcp_line("0100007F", 9100, "0A", 7777)  # something else listening (node exporter)
    )
    (root / "net" / "tcp6").write_text(
        TCP_HEADER + tcp_line("00000000000000000000000000000000", 8001, "0A", 6666)
    )
    make_proc(root, 1, 0, "systemd")
    make_proc(root, 100, 1, "python3 (vllm serve)", sockets=(5555, 5556))
    make_proc(root, 101, 100, "VLLM::EngineCore")
    make_proc(root, 102, 101, "VLLM::Worker")
    make_proc(root, 103, 101, "VLLM::Worker")
    make_proc(root, 200, 1, "sglang", sockets=(6666,))
    make_proc(root, 201, 200, "sglang::scheduler")
    make_proc(root, 300, 1, "node_exporter", sockets=(7777,))
    return root


def directory() -> GpuDirectory:
    d = GpuDirectory()
    d.update({"0": "GPU-a", "1": "GPU-b", "2": "GPU-c"})
    d.set_processes("GPU-a", frozenset({102}))
    d.set_processes("GPU-b", frozenset({103}))
    d.set_processes("GPU-c", frozenset({201, 4242}))  # 4242: a process this namespace cannot see
    return d


def test_listeners_parse_ipv4_ipv6_and_skip_non_listening(tmp_path: Path) -> None:
    listeners = ProcFs(vllm_tree(tmp_path)).listeners()
    assert {(x.address, x.port) for x in listeners.values()} == {
        ("0.0.0.0", 8000),
        ("127.0.0.1", 9100),
        ("::", 8001),
    }


def test_process_names_with_spaces_and_parentheses(tmp_path: Path) -> None:
    assert ProcFs(vllm_tree(tmp_path)).parent(100) == 1


def test_endpoint_joins_to_the_gpus_of_its_descendants(tmp_path: Path) -> None:
    procfs = ProcFs(vllm_tree(tmp_path))
    assert gpus_of_endpoint("http://127.0.0.1:8000/metrics", procfs, directory()) == [
        GpuProcess("0", "GPU-a", 102),
        GpuProcess("1", "GPU-b", 103),
    ]
    assert gpus_of_endpoint("http://[::1]:8001/metrics", procfs, directory()) == [
        GpuProcess("2", "GPU-c", 201)
    ]
    assert gpus_of_endpoint("http://127.0.0.1:9999/metrics", procfs, directory()) == []


def test_a_url_of_another_host_is_never_joined_by_its_port_alone(tmp_path: Path) -> None:
    # The same --vllm-url on every node (a Service) must not take whatever listens on that port here.
    root = vllm_tree(tmp_path)
    procfs = ProcFs(root)
    assert gpus_of_endpoint("http://10.0.0.5:8001/metrics", procfs, directory()) == []
    (root / "self" / "net").mkdir(parents=True)
    (root / "self" / "net" / "fib_trie").write_text("Local:\n  |-- 10.0.0.5\n     /32 host LOCAL\n")
    assert gpus_of_endpoint("http://10.0.0.5:8001/metrics", procfs, directory()) == [
        GpuProcess("2", "GPU-c", 201)
    ]  # one of this exporter's own addresses


def test_discovery_walks_from_gpu_processes_to_their_engines_api_servers(tmp_path: Path) -> None:
    found = settled(ProcFs(vllm_tree(tmp_path)), directory())
    # The lone [::] listener is tried on IPv6 loopback first (it may be IPV6_V6ONLY); not node_exporter.
    assert found.urls == ["http://127.0.0.1:8000/metrics", "http://[::1]:8001/metrics"]
    assert found.tally() == {"pid_not_visible": 1, "scraped": 3}  # 4242: not in this PID namespace


def test_missing_proc_is_empty_not_an_error(tmp_path: Path) -> None:
    procfs = ProcFs(tmp_path / "nothing")
    assert procfs.listeners() == {} and procfs.pids() == []
    assert gpus_of_endpoint("http://127.0.0.1:8000/metrics", procfs, directory()) == []


def test_discovery_never_returns_an_excluded_process_such_as_the_exporter(tmp_path: Path) -> None:
    # The exporter (pid 100 here) can be an ancestor of GPU processes: it must not discover itself.
    found = settled(ProcFs(vllm_tree(tmp_path)), directory(), exclude=frozenset({100}))
    assert found.urls == ["http://[::1]:8001/metrics"]
