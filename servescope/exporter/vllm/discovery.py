"""Zero-config discovery: from NVML's GPU processes to the HTTP endpoints of their API servers.

Only an API server's listener speaks HTTP. vLLM's `VLLM::Worker` and `VLLM::EngineCore*` processes
(SGLang's `sglang::*`) hold gloo, ZMQ, NCCL and torch.distributed sockets that must never receive
stray bytes, so their listeners are never candidates. In a tree with such processes the candidates
are the `VLLM::APIServer*` processes and the `vllm serve` / SGLang root (its `--port` when given);
in a tree without them (another server, a simulated engine) the GPU process and its ancestors.

Each candidate's listeners are read in ITS network namespace (`<pid>/net/tcp`): an engine in another
pod is scraped at that pod's address (`<pid>/net/fib_trie`), never at this exporter's loopback. One
that listens only on its pod's loopback cannot be reached and is reported, not dropped.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, field
from enum import Enum

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import Listener, ProcFs

_WILDCARD = ("0.0.0.0", "::")
_SERVE_ROOTS = ("vllm", "sglang")
_SERVE_MODULES = ("vllm.entrypoints", "sglang.launch_server")


class Role(Enum):
    API = "api"  # holds the HTTP listener
    INTERNAL = "internal"  # engine core, worker, coordinator: never probed
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Process:
    pid: int
    role: Role
    port: int | None  # the --port of a serving root


@dataclass
class Discovery:
    """What one discovery cycle looked at and found."""

    gpu_pids: list[int] = field(default_factory=list)
    # URL -> the processes behind it: its API-server processes and the GPU processes that led there
    owners: dict[str, set[int]] = field(default_factory=dict)
    # (reason, "netns address:port") -> the processes holding that listener
    unreachable: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    @property
    def urls(self) -> list[str]:
        return sorted(self.owners)

    def reports(self) -> list[tuple[str, str]]:
        """(reason, message) for each listener that cannot be reached from here."""
        return [
            (reason, f"pid {', '.join(map(str, sorted(pids)))} in {where} only")
            for (reason, where), pids in sorted(self.unreachable.items())
        ]


def _port_flag(argv: list[str]) -> int | None:
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--port" and i + 1 < len(argv) else arg.removeprefix("--port=")
        if (arg == "--port" or arg.startswith("--port=")) and value.isdigit():
            return int(value)
    return None


def classify(procfs: ProcFs, pid: int) -> Process:
    """A process's role from its title (setproctitle writes it over argv) and kernel name."""
    argv, comm = procfs.cmdline(pid), procfs.comm(pid)
    title = argv[0] if argv else comm
    if title.startswith("VLLM::APIServer"):
        return Process(pid, Role.API, None)
    if title.startswith(("VLLM::", "sglang::")) or comm.startswith(("VLLM::", "sglang::")):
        return Process(pid, Role.INTERNAL, None)
    words = " ".join(argv).split()
    served = any(
        os.path.basename(word) in _SERVE_ROOTS and nxt == "serve" for word, nxt in itertools.pairwise(words)
    )
    if served or comm in _SERVE_ROOTS or any(m in word for word in words for m in _SERVE_MODULES):
        return Process(pid, Role.API, _port_flag(argv))
    return Process(pid, Role.OTHER, None)


def candidate_processes(procfs: ProcFs, gpu_pid: int, children: dict[int, list[int]]) -> list[Process]:
    """The processes whose listeners may be the HTTP endpoint serving `gpu_pid`."""
    chain = [classify(procfs, pid) for pid in (gpu_pid, *procfs.ancestors(gpu_pid))]
    if all(p.role is Role.OTHER for p in chain):
        return chain
    # The server's own tree ends at its topmost vLLM/SGLang process: above it (a shell, a container
    # shim) other servers' processes may be children too.
    top = max(i for i, p in enumerate(chain) if p.role is not Role.OTHER)
    tree = chain[: top + 1]
    near = [p for p in tree if p.role is Role.API]
    near += [
        p
        for member in tree
        for child in children.get(member.pid, [])
        if (p := classify(procfs, child)).role is Role.API and p not in near
    ]
    # vLLM before process titles named its API server: the parent that spawned the engine core.
    return near or chain[top + 1 : top + 2]


def _own_netns(procfs: ProcFs) -> str | None:
    own = procfs.netns("self")
    if own is None:
        with contextlib.suppress(OSError):
            own = os.readlink("/proc/self/ns/net")
    return own


def _host(listener: Listener, pid: int, procfs: ProcFs, same_netns: bool) -> tuple[str | None, str]:
    """Where to reach a listener from here, or None and the reason it cannot be reached."""
    address = listener.address
    loopback = address.startswith("127.") or address == "::1"
    if same_netns:
        return ("127.0.0.1" if address in _WILDCARD else address), ""
    if loopback:
        return None, "loopback_only"
    if address in _WILDCARD:
        local = procfs.local_addresses(pid)
        return (local[0], "") if local else (None, "no_pod_address")
    return address, ""


def discover(procfs: ProcFs, directory: GpuDirectory, exclude: frozenset[int] = frozenset()) -> Discovery:
    """Every reachable /metrics URL of the API servers behind NVML's GPU processes."""
    found = Discovery(gpu_pids=sorted({pid for _, _, pid in directory.processes()} - exclude))
    if not found.gpu_pids:
        return found
    children, own = procfs.children(), _own_netns(procfs)
    urls_of: dict[int, list[str]] = {}  # candidate pid -> its URLs, each candidate read once
    for gpu_pid in found.gpu_pids:
        for process in candidate_processes(procfs, gpu_pid, children):
            if process.pid in exclude:
                continue
            if process.pid not in urls_of:
                urls_of[process.pid] = _urls(found, procfs, process, own)
            for url in urls_of[process.pid]:
                found.owners.setdefault(url, set()).update((process.pid, gpu_pid))
    return found


def _urls(found: Discovery, procfs: ProcFs, process: Process, own: str | None) -> list[str]:
    theirs = procfs.netns(process.pid)
    same = theirs is None or own is None or theirs == own
    listeners = procfs.listeners(process.pid)
    held = [listeners[i] for i in sorted(procfs.socket_inodes(process.pid) & listeners.keys())]
    if process.port is not None and any(x.port == process.port for x in held):
        held = [x for x in held if x.port == process.port]
    urls = []
    for listener in held:
        host, reason = _host(listener, process.pid, procfs, same)
        if host is None:
            where = f"network namespace {theirs} listens on {listener.address}:{listener.port}"
            found.unreachable.setdefault((reason, where), set()).add(process.pid)
            continue
        host = f"[{host}]" if ":" in host else host
        urls.append(f"http://{host}:{listener.port}/metrics")
    return urls
