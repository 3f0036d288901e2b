"""Engine <-> GPU: the processes behind an endpoint, matched against NVML's compute processes.

For an endpoint on this host: the PIDs listening on its port, plus all their descendants (vLLM's API
server holds no GPU memory; its EngineCore and Worker children do), intersected with the PIDs NVML
lists per GPU. Zero-config discovery runs the same walk backwards: from NVML's PIDs up to the
ancestors that listen on a TCP port.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.discovery import discover
from servescope.exporter.vllm.procfs import ProcFs


def endpoint_port(url: str) -> int | None:
    parts = urlsplit(url)
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def gpus_of_endpoint(
    url: str, procfs: ProcFs, directory: GpuDirectory, owners: set[int] | None = None
) -> list[GpuProcess]:
    """GPU processes of the tree that serves `url`: below `owners` when discovery found them, else
    below the PIDs listening on its port (empty when it is not local)."""
    port = endpoint_port(url)
    if port is None:
        return []
    listening = owners or procfs.listening_pids(port)
    if not listening:
        return []
    tree = procfs.descendants(listening)
    return sorted(
        (GpuProcess(gpu, uuid, pid) for gpu, uuid, pid in directory.processes() if pid in tree),
        key=lambda g: (g.gpu, g.pid),
    )


def candidate_urls(
    procfs: ProcFs, directory: GpuDirectory, exclude: frozenset[int] = frozenset()
) -> list[str]:
    """/metrics URLs of the API servers behind NVML's GPU processes (discovery.discover).

    `exclude` keeps this exporter out: it may be an ancestor (simulated engines are its children),
    and its /metrics re-exports engine series, which must never be scraped back in.
    """
    return discover(procfs, directory, exclude).urls
