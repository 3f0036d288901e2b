"""Fixture /proc trees: processes with titles, sockets, network namespaces and environments, and the
real vLLM 0.32 data-parallel tree rebuilt from its capture (shared/samples)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.discovery import Discovery, discover
from servescope.exporter.vllm.probing import settle
from servescope.exporter.vllm.procfs import ProcFs
from tests.helpers import SAMPLES

TCP_HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)
DP2_PROCESSES = SAMPLES / "vllm-0.32-cpu-dp2-processes.txt"


def hex_address(address: str) -> str:
    """An address as /proc/net/tcp and tcp6 print it: 32-bit words, each little-endian."""
    packed = ipaddress.ip_address(address).packed
    return "".join(packed[i : i + 4][::-1].hex().upper() for i in range(0, len(packed), 4))


def route_table(routes: list[tuple[str, str, str]]) -> str:
    """/proc/net/route for (interface, "default" or a.b.c.d/n, gateway or "")."""
    lines = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    for iface, destination, gateway in routes:
        net = ipaddress.IPv4Network("0.0.0.0/0" if destination == "default" else destination)
        flags = 0x0003 if gateway else 0x0001
        hops = hex_address(gateway or "0.0.0.0")
        lines.append(
            f"{iface}\t{hex_address(str(net.network_address))}\t{hops}\t{flags:04X}\t0\t0\t0\t"
            f"{hex_address(str(net.netmask))}\t0\t0\t0"
        )
    return "\n".join(lines) + "\n"


def if_inet6(addresses: list[tuple[str, str, int, int]]) -> str:
    """/proc/net/if_inet6 for (address, interface, scope, flags), prefix /64."""
    rows = []
    for i, (address, iface, scope, flags) in enumerate(addresses):
        digits = ipaddress.IPv6Address(address).exploded.replace(":", "")
        rows.append(f"{digits} {i + 2:02x} 40 {scope:02x} {flags:02x} {iface:>8}\n")
    return "".join(rows)


def ipv6_route(default_iface: str | None) -> str:
    """/proc/net/ipv6_route: the kernel's unreachable default on lo, and a default route if given."""
    zero = "0" * 32
    rows = [f"{zero} 00 {zero} 00 {zero} ffffffff 00000001 00000000 00200200       lo"]
    if default_iface:
        hop = "fe80" + "0" * 27 + "1"
        rows.insert(0, f"{zero} 00 {zero} 00 {hop} 00000400 00000001 00000000 00000003 {default_iface:>8}")
    return "\n".join(rows) + "\n"


def fib_trie(addresses: list[str]) -> str:
    """The Local table of /proc/net/fib_trie as the kernel prints it, for loopback and `addresses`."""
    lines = ["Local:", "  +-- 0.0.0.0/0 3 0 5", "     |-- 127.0.0.1", "        /32 host LOCAL"]
    for address in addresses:
        lines += [
            f"     |-- {address}",
            "        /32 host LOCAL",
            f"     |-- {address.rsplit('.', 1)[0]}.255",
        ]
        lines += ["        /32 link BROADCAST"]
    return "\n".join(lines) + "\n"


@dataclass
class Netns:
    """One network namespace: its identity, local addresses and listening sockets (address, port, inode)."""

    ident: str
    addresses: list[str] = field(default_factory=list)
    listeners: list[tuple[str, int, int]] = field(default_factory=list)
    routes: list[tuple[str, str, str]] = field(default_factory=list)  # (iface, default | a.b.c.d/n, gateway)
    v6: list[tuple[str, str, int, int]] = field(default_factory=list)  # (address, iface, scope, flags)
    v6_default: str | None = None  # the interface of the IPv6 default route

    def tcp(self, v6: bool = False) -> str:
        rest = "00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0"
        rows = [
            f"   {i}: {hex_address(a)}:{p:04X} {rest} {n} 1"
            for i, (a, p, n) in enumerate(self.listeners)
            if (":" in a) == v6
        ]
        return TCP_HEADER + "".join(f"{row}\n" for row in rows)


class ProcTree:
    """Writes /proc/<pid>/{stat,cmdline,comm,fd,environ,ns/net,net/*} under `root`."""

    def __init__(self, root: Path, own: Netns) -> None:
        self.root = root
        self.own = own
        root.mkdir(parents=True, exist_ok=True)
        (root / "self" / "ns").mkdir(parents=True)
        (root / "self" / "ns" / "net").symlink_to(own.ident)

    def process(
        self,
        pid: int,
        ppid: int,
        title: str,
        *,
        argv: tuple[str, ...] = (),
        sockets: tuple[int, ...] = (),
        netns: Netns | None = None,
        environ: dict[str, str] | None = None,
        comm: str | None = None,
    ) -> None:
        base = self.root / str(pid)
        (base / "fd").mkdir(parents=True)
        (base / "stat").write_text(f"{pid} ({title[:15]}) S {ppid} {pid} {pid} 0 -1 4194560\n")
        (base / "comm").write_text((comm or title)[:15] + "\n")
        (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in (title, *argv)) + b"\0")
        for fd, inode in enumerate(sockets, start=3):
            (base / "fd" / str(fd)).symlink_to(f"socket:[{inode}]")
        if environ is not None:
            (base / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in environ.items()))
        ns = netns or self.own
        (base / "ns").mkdir()
        (base / "ns" / "net").symlink_to(ns.ident)
        (base / "net").mkdir()
        (base / "net" / "tcp").write_text(ns.tcp())
        (base / "net" / "tcp6").write_text(ns.tcp(v6=True))
        (base / "net" / "fib_trie").write_text(fib_trie(ns.addresses))
        (base / "net" / "route").write_text(route_table(ns.routes))
        (base / "net" / "if_inet6").write_text(if_inet6(ns.v6))
        (base / "net" / "ipv6_route").write_text(ipv6_route(ns.v6_default))


@dataclass(frozen=True)
class CapturedProcess:
    pid: int
    ppid: int
    title: str


def dp2_capture() -> tuple[list[CapturedProcess], dict[int, list[tuple[int, int]]]]:
    """The captured processes, and per pid its listening (port, fd) pairs."""
    text = DP2_PROCESSES.read_text()
    processes = [
        CapturedProcess(int(m[1]), int(m[2]), m[3])
        for m in re.finditer(r"^\s*(\d+)\s+(\d+)\s+(\S.*)$", text.split("## listeners")[0], re.M)
    ]
    listening: dict[int, list[tuple[int, int]]] = {}
    for port, users in re.findall(r"^127\.0\.0\.1:(\d+) users:\((.*)\)$", text, re.M):
        for pid, fd in re.findall(r"pid=(\d+),fd=(\d+)", users):
            listening.setdefault(int(pid), []).append((int(port), int(fd)))
    return processes, listening


API_PORT = 18001
ROOT_PID = 9432  # `vllm serve`: named only in the listeners' part of the capture
WORKERS = {"0": 9591, "1": 9579}  # DP rank -> its VLLM::Worker (child of VLLM::EngineCore_DP<rank>)


def dp2_tree(
    root: Path, *, with_port_flag: bool = True, pod: Netns | None = None, api_bind: str = "127.0.0.1"
) -> ProcTree:
    """The captured DP=2 tree, in this exporter's namespace or in `pod`'s; one inode per port, shared
    by the processes that hold it (the API port: the root and both API servers). Captured on loopback;
    `api_bind` rebinds the API port (0.0.0.0 as in a pod)."""
    processes, listening = dp2_capture()
    own = Netns("net:[4026531840]", ["198.18.0.1"])
    ns = pod or own
    ports = sorted({port for held in listening.values() for port, _ in held})
    inode = {port: 700_000 + i for i, port in enumerate(ports)}
    ns.listeners += [(api_bind if port == API_PORT else "127.0.0.1", port, inode[port]) for port in ports]
    tree = ProcTree(root, own)
    flags = ("--port", str(API_PORT)) if with_port_flag else ()
    argv = ("<venv>/bin/vllm", "serve", "tiny-llm", "--data-parallel-size", "2", *flags)
    tree.process(
        ROOT_PID, 9400, "<venv>/bin/python3", argv=argv, sockets=(inode[API_PORT],), netns=ns, comm="vllm"
    )
    for p in processes:
        sockets = tuple(inode[port] for port, _ in sorted(listening.get(p.pid, []), key=lambda x: x[1]))
        tree.process(p.pid, p.ppid, p.title, sockets=sockets, netns=ns)
    return tree


def reachable(host: str, port: int) -> str | None:
    """A probe's TCP connect that always succeeds: fixture trees have no real listeners."""
    return None


def settled(procfs: ProcFs, directory: GpuDirectory, exclude: frozenset[int] = frozenset()) -> Discovery:
    """Discovery on a fixture tree, every candidate's first address taken as answering."""
    return settle(discover(procfs, directory, exclude), reachable, lambda url: None)
