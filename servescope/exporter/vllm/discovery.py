"""Zero-config discovery: from NVML's GPU processes to the HTTP endpoints of their engines' API servers.

Only a serving engine's API server speaks HTTP, and only a process identified as one is ever probed:
a process titled or launched as vLLM's, SGLang's or TGI's API server (`VLLM::APIServer`, `vllm serve`,
`python -m vllm.entrypoints...`, `sglang.launch_server`, `text-generation-router`), or one matching a
configured pattern (--engine-process). Their internal processes (`VLLM::EngineCore*`, `VLLM::Worker`,
`sglang::*`, TGI's shards) hold gloo, ZMQ, NCCL and torch.distributed sockets that must never receive
stray bytes. A GPU process with no engine in its process tree (a training job, torchrun, Ray) is
counted as `not_an_engine` and left alone, and so is everything above an engine's tree (a shell, a
container shim, an unrelated service in the same parent).

Each candidate's listeners are read in ITS network namespace (listening.py) and reached at its pod's
address (addresses.py); probing.py then tries them. Every GPU process ends with one outcome, named by a
reason on servescope_vllm_discovery_gpu_processes and in /api/v1/sources.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from servescope.core.vllm.reach import NO_LISTENER, PID_NOT_VISIBLE
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.listening import Candidate, Outcome, candidates_of
from servescope.exporter.vllm.procfs import ProcFs

_SERVE_ROOTS = ("vllm", "sglang")
_SERVE_MODULES = ("vllm.entrypoints", "sglang.launch_server")
_INTERNAL_TITLES = ("VLLM::", "sglang::")
# TGI: the launcher starts the Rust router (the HTTP server) and the Python shards (the GPU processes).
_TGI_API = "text-generation-router"
_TGI_INTERNAL = ("text-generation-launcher", "text-generation-server")
# Never a serving engine's HTTP server, even as the parent of an engine core: shells, init and shims.
_NEVER_SERVERS = frozenset(
    {"bash", "sh", "dash", "zsh", "ash", "busybox", "tini", "dumb-init", "conmon", "runc", "crun",
     "containerd-shim", "containerd-shim-runc-v2", "sshd", "slurmstepd", "systemd", "init", "sudo", "su",
     "torchrun", "pause"}
)  # fmt: skip


class Role(Enum):
    API = "api"  # holds the HTTP listener
    INTERNAL = "internal"  # engine core, worker, coordinator, launcher: never probed
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Process:
    pid: int
    role: Role
    port: int | None  # the --port of a serving root


@dataclass
class Discovery:
    """What one discovery cycle looked at and what each GPU process came to."""

    gpu_pids: list[int] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    # GPU pid -> its outcome; discovery decides some (not_an_engine, ...), probing.settle the others
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    # URL -> its API-server processes and the GPU processes that led there (filled by probing)
    owners: dict[str, set[int]] = field(default_factory=dict)

    @property
    def urls(self) -> list[str]:
        return sorted(self.owners)

    def reports(self) -> list[tuple[str, str]]:
        """(reason, message) for every GPU process whose engine cannot be scraped, each message once."""
        found = {(o.reason, o.detail) for o in self.outcomes.values() if o.failed}
        return sorted(found)

    def tally(self) -> dict[str, int]:
        """GPU processes by outcome reason."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome.reason] = counts.get(outcome.reason, 0) + 1
        return dict(sorted(counts.items()))


def _port_flag(argv: list[str]) -> int | None:
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--port" and i + 1 < len(argv) else arg.removeprefix("--port=")
        if (arg == "--port" or arg.startswith("--port=")) and value.isdigit():
            return int(value)
    return None


def classify(procfs: ProcFs, pid: int, patterns: Sequence[re.Pattern[str]] = ()) -> Process:
    """A process's role from its title (setproctitle writes it over argv) and kernel name."""
    argv, comm = procfs.cmdline(pid), procfs.comm(pid)
    title = argv[0] if argv else comm
    if title.startswith("VLLM::APIServer"):
        return Process(pid, Role.API, None)
    if title.startswith(_INTERNAL_TITLES) or comm.startswith(_INTERNAL_TITLES):
        return Process(pid, Role.INTERNAL, None)
    words = " ".join(argv).split()
    program = os.path.basename(words[0]) if words else comm
    served = any(
        os.path.basename(word) in _SERVE_ROOTS and nxt == "serve" for word, nxt in itertools.pairwise(words)
    )
    launched = any(m in word for word in words for m in _SERVE_MODULES)
    if served or comm in _SERVE_ROOTS or launched or _TGI_API in (program, comm):
        return Process(pid, Role.API, _port_flag(argv))
    if program in _TGI_INTERNAL or comm in _TGI_INTERNAL:
        return Process(pid, Role.INTERNAL, None)
    line = " ".join(argv) or comm
    if any(pattern.search(title) or pattern.search(line) for pattern in patterns):
        return Process(pid, Role.API, _port_flag(argv))
    return Process(pid, Role.OTHER, None)


def candidate_processes(
    procfs: ProcFs,
    gpu_pid: int,
    children: dict[int, list[int]],
    patterns: Sequence[re.Pattern[str]] = (),
) -> list[Process] | None:
    """The API-server processes that may serve `gpu_pid`'s engine; None when it runs no engine (then
    nothing in its process tree is probed)."""
    chain = [classify(procfs, pid, patterns) for pid in (gpu_pid, *procfs.ancestors(gpu_pid))]
    engine = [i for i, p in enumerate(chain) if p.role is not Role.OTHER]
    if not engine:
        return None
    # The server's own tree ends at its topmost engine process: above it (a shell, a container shim, a
    # launcher with a service of its own) other processes' children and listeners are not ours.
    tree = chain[: engine[-1] + 1]
    near = [p for p in tree if p.role is Role.API]
    near += [
        p
        for member in tree
        for child in children.get(member.pid, [])
        if (p := classify(procfs, child, patterns)).role is Role.API and p not in near
    ]
    if near:
        return near
    # vLLM before process titles named its API server: the process that spawned the engine core, which
    # multiprocessing makes the server itself (never a shell or a launcher).
    spawner = chain[engine[-1] + 1 : engine[-1] + 2]
    return [p for p in spawner if procfs.comm(p.pid) not in _NEVER_SERVERS]


def own_netns(procfs: ProcFs) -> str | None:
    own = procfs.netns("self")
    if own is None:
        with contextlib.suppress(OSError):
            own = os.readlink("/proc/self/ns/net")
    return own


def discover(
    procfs: ProcFs,
    directory: GpuDirectory,
    exclude: frozenset[int] = frozenset(),
    patterns: Sequence[re.Pattern[str]] = (),
) -> Discovery:
    """The API servers behind NVML's GPU processes, and the ports to probe for each; nothing is sent."""
    gpu_pids = sorted({pid for _, _, pid in directory.processes()} - exclude)
    found = Discovery(gpu_pids)
    if not gpu_pids:
        return found
    children, own = procfs.children(), own_netns(procfs)
    ports: dict[int, list[Candidate]] = {}  # API process -> its candidates, each process read once
    by_key: dict[tuple[str, int], Candidate] = {}  # (network namespace, port): one listener, many holders
    for gpu_pid in gpu_pids:
        if procfs.parent(gpu_pid) is None:
            detail = f"pid {gpu_pid} is not in {procfs.root}: not this PID namespace (hostPID?), or it exited"
            found.outcomes[gpu_pid] = Outcome(PID_NOT_VISIBLE, detail)
            continue
        servers = candidate_processes(procfs, gpu_pid, children, patterns)
        if servers is None:
            found.outcomes[gpu_pid] = Outcome.not_an_engine(gpu_pid)
            continue
        servers = [p for p in servers if p.pid not in exclude]
        if not servers:
            detail = f"pid {gpu_pid} runs an engine with no API server among its ancestors or their children"
            found.outcomes[gpu_pid] = Outcome(NO_LISTENER, detail)
            continue
        for server in servers:
            if server.pid not in ports:
                ports[server.pid] = [
                    by_key.setdefault(c.key, c) for c in candidates_of(procfs, server.pid, server.port, own)
                ]
            for candidate in ports[server.pid]:
                candidate.api_pids.add(server.pid)
                candidate.gpu_pids.add(gpu_pid)
    found.candidates = list(by_key.values())
    return found
