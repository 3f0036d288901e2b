"""Engine <-> GPU: the processes behind an endpoint, matched against NVML's compute processes.

For an endpoint on this host: the processes discovery found behind it (else the PIDs listening on its
port), plus all their descendants (vLLM's API server holds no GPU memory; its EngineCore and Worker
children do), intersected with the PIDs NVML lists per GPU. Zero-config discovery runs the same walk
backwards (discovery.py).

Several engines behind one endpoint are data-parallel ranks: each `VLLM::EngineCore_DP<n>` and its
`VLLM::Worker` children hold rank n's GPUs (NVML's PIDs, else GPU UUIDs in its CUDA_VISIBLE_DEVICES;
indexes there count the engine container's GPUs, not this node's, and are not used). Where the ranks
cannot be told apart, no engine is mapped to any GPU rather than every engine to every GPU.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.procfs import ProcFs


def endpoint_port(url: str) -> int | None:
    parts = urlsplit(url)
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


_DP_RANK = re.compile(r"^VLLM::EngineCore_DP(\d+)\b")
_GPU_UUID = re.compile(r"^GPU-[0-9a-fA-F-]{36}$")


@dataclass(frozen=True)
class EndpointGpus:
    """The GPUs of an endpoint's process tree, and of each data-parallel rank when it names ranks."""

    gpus: list[GpuProcess] = field(default_factory=list)
    ranks: dict[str, list[GpuProcess]] = field(default_factory=dict)
    ambiguous: bool = False  # two ranks share a GPU: no rank can be told apart


def engine_gpus(engines: list[str], joined: EndpointGpus) -> dict[str, list[GpuProcess]] | None:
    """The GPUs of each engine label of one endpoint, or None when they cannot be told apart."""
    if len(engines) <= 1:
        return {engine: joined.gpus for engine in engines}  # one engine (a TP group): all of them
    if joined.ambiguous or not all(joined.ranks.get(engine) for engine in engines):
        return None
    return {engine: joined.ranks[engine] for engine in engines}


def _rank_gpus(
    procfs: ProcFs, tree: set[int], directory: GpuDirectory, gpus: list[GpuProcess]
) -> EndpointGpus:
    ranks: dict[str, list[GpuProcess]] = {}
    for pid in sorted(tree):
        argv = procfs.cmdline(pid)
        rank = _DP_RANK.match(argv[0]) if argv else None
        if rank is None:
            continue
        below = procfs.descendants({pid})
        held = [g for g in gpus if g.pid in below] or _visible_gpus(procfs, pid, directory)
        ranks.setdefault(rank.group(1), []).extend(held)
    claimed = [g.uuid for held in ranks.values() for g in held]
    return EndpointGpus(gpus, ranks, ambiguous=len(claimed) != len(set(claimed)))


def _visible_gpus(procfs: ProcFs, pid: int, directory: GpuDirectory) -> list[GpuProcess]:
    visible = procfs.environ(pid, "CUDA_VISIBLE_DEVICES") or ""
    index_of = {uuid: index for index, uuid in directory.known().items()}
    return [
        GpuProcess(index_of[item], item, pid)
        for item in (part.strip() for part in visible.split(","))
        if _GPU_UUID.match(item) and item in index_of
    ]


def join_endpoint(
    url: str, procfs: ProcFs, directory: GpuDirectory, owners: set[int] | None = None
) -> EndpointGpus:
    """The GPUs behind `url` and, for data-parallel servers, behind each rank."""
    gpus = gpus_of_endpoint(url, procfs, directory, owners)
    listening = serving_pids(url, procfs, owners)
    if not listening:
        return EndpointGpus(gpus)
    return _rank_gpus(procfs, procfs.descendants(listening), directory, gpus)


def _is_local(host: str, procfs: ProcFs) -> bool:
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return True
    return host == "localhost" or host in procfs.local_addresses("self")


def serving_pids(url: str, procfs: ProcFs, owners: set[int] | None = None) -> set[int]:
    """The processes behind `url`: `owners` when discovery found them, else those listening on its
    port here, for a URL of this host only (another host's, or a Service's, is no local process's)."""
    port = endpoint_port(url)
    if owners or port is None:
        return set(owners or ())
    return procfs.listening_pids(port) if _is_local(urlsplit(url).hostname or "", procfs) else set()


def gpus_of_endpoint(
    url: str, procfs: ProcFs, directory: GpuDirectory, owners: set[int] | None = None
) -> list[GpuProcess]:
    """GPU processes of the tree that serves `url` (empty when it is not local)."""
    listening = serving_pids(url, procfs, owners)
    if not listening:
        return []
    tree = procfs.descendants(listening)
    return sorted(
        (GpuProcess(gpu, uuid, pid) for gpu, uuid, pid in directory.processes() if pid in tree),
        key=lambda g: (g.gpu, g.pid),
    )
