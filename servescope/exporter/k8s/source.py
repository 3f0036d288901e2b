"""Source `k8s`: which pod and container holds each GPU, from the kubelet's pod-resources List."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from servescope.core.catalog import placement as c
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.k8s import podresources_pb2 as pb
from servescope.exporter.k8s.client import PodResourcesClient, PodResourcesError
from servescope.exporter.k8s.devices import (
    GpuNaming,
    MigSlice,
    claim_gpu,
    device_gpu,
    device_slice,
    is_gpu_resource,
)
from servescope.exporter.sources.base import Collection, Problem, SourceError

log = logging.getLogger(__name__)

MIG_REFRESH_SECONDS = 60.0  # an unknown MIG UUID asks NVML again at most this often


@dataclass(frozen=True, slots=True, order=True)
class Holder:
    namespace: str
    pod: str
    container: str


Slices = Mapping[str, tuple[str, str, str]]  # MIG UUID -> (parent GPU UUID, GPU instance, compute instance)


class MigTable:
    """What NVML says of MIG UUIDs, asked again when an unknown one shows up (rate-limited)."""

    def __init__(self, lookup: Callable[[], Slices], monotonic: Callable[[], float]) -> None:
        self._lookup, self._monotonic = lookup, monotonic
        self._slices: Slices = {}
        self._asked_at = float("-inf")

    def slice(self, mig_uuid: str) -> tuple[str, str, str] | None:
        if mig_uuid not in self._slices and self._monotonic() - self._asked_at >= MIG_REFRESH_SECONDS:
            self._asked_at = self._monotonic()
            self._slices = dict(self._lookup())
        return self._slices.get(mig_uuid)

    def parent(self, mig_uuid: str) -> str | None:
        found = self.slice(mig_uuid)
        return None if found is None else found[0]


def _parents_only(lookup: Callable[[], Mapping[str, str]]) -> Callable[[], Slices]:
    return lambda: {mig: (parent, "", "") for mig, parent in lookup().items()}


def _container_gpus(
    container: pb.ContainerResources,
    naming: GpuNaming,
    unresolved: list[str],
    slices: set[tuple[str, MigSlice]] | None = None,
) -> set[str]:
    """The physical GPUs a container holds; the MIG slices among them added to `slices` (with parent)."""
    gpus: set[str] = set()
    for devices in container.devices:
        if not is_gpu_resource(devices.resource_name):
            continue
        for device_id in devices.device_ids:
            uuid = device_gpu(devices.resource_name, device_id, naming)
            if uuid:
                gpus.add(uuid)
                carved = device_slice(devices.resource_name, device_id, naming)
                if carved is not None and slices is not None:
                    slices.add((uuid, carved))
            else:
                unresolved.append(f"{devices.resource_name}={device_id[:80]}")
    for claim in container.dynamic_resources:
        for resource in claim.claim_resources:
            cdi = [device.name for device in resource.cdi_devices]
            uuid = claim_gpu(resource.driver_name, resource.device_name, cdi, naming)
            if uuid:
                gpus.add(uuid)
    return gpus


def holders_by_gpu(
    listing: pb.ListPodResourcesResponse,
    naming: GpuNaming,
    unresolved: list[str],
    slices: dict[tuple[str, MigSlice], set[Holder]] | None = None,
) -> dict[str, set[Holder]]:
    """GPU UUID -> the containers holding it (several for a time-sliced or MIG-partitioned GPU); each
    MIG slice's holders, keyed by (parent UUID, slice), into `slices`."""
    found: dict[str, set[Holder]] = {}
    for pod in listing.pod_resources:
        for container in pod.containers:
            holder = Holder(pod.namespace, pod.name, container.name)
            carved: set[tuple[str, MigSlice]] = set()
            for uuid in _container_gpus(container, naming, unresolved, carved):
                found.setdefault(uuid, set()).add(holder)
            for key in carved:
                if slices is not None:
                    slices.setdefault(key, set()).add(holder)
    return found


class PodResourcesSource:
    """Reads List (and GetAllocatableResources) every interval; a missing socket is `absent`."""

    name = "k8s"

    def __init__(
        self,
        socket_path: str,
        *,
        directory: GpuDirectory,
        hostname: str,
        mig_parents: Callable[[], Mapping[str, str]] = dict,
        mig_slices: Callable[[], Slices] | None = None,
        interval_seconds: float = 15.0,
        client: PodResourcesClient | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._socket = socket_path
        self._directory, self._hostname = directory, hostname
        self._mig = MigTable(mig_slices or _parents_only(mig_parents), monotonic)
        self._client = client or PodResourcesClient(socket_path)
        self._last_pods: frozenset[Holder] | None = None

    def collect(self) -> Collection:
        if not Path(self._socket).exists():
            # No pod is said to hold a GPU on what is no longer known.
            self._directory.set_holders({}, listed=False)
            raise SourceError("absent", f"{self._socket}: no kubelet pod-resources socket", absent=True)
        try:
            listing = self._client.list()
            allocatable = self._client.allocatable()
        except PodResourcesError as exc:
            self._directory.set_holders({}, listed=False)
            raise SourceError(exc.reason, str(exc)) from None
        uuids = self._directory.known()
        unresolved: list[str] = []
        slices: dict[tuple[str, MigSlice], set[Holder]] = {}
        naming = GpuNaming(uuids, self._mig.parent, self._mig.slice)
        holders = holders_by_gpu(listing, naming, unresolved, slices)
        self._directory.set_holders({uuid: frozenset(map(_labels, held)) for uuid, held in holders.items()})
        index_of = {uuid: index for index, uuid in uuids.items()}
        samples = self._pod_samples(holders, index_of) + self._process_samples(holders, index_of)
        samples += self._slice_samples(slices, index_of)
        samples += _allocatable_samples(allocatable)
        self._log_change(holders)
        problems = [Problem("unknown_device", f"no GPU of this node is {device}") for device in unresolved]
        unknown = sorted(set(holders) - set(index_of))
        if uuids:  # before NVML's first enumeration every GPU is unknown: nothing to report yet
            problems += [
                Problem("unknown_device", f"{uuid}: allocated but not seen by NVML") for uuid in unknown
            ]
        return Collection(samples, problems)

    def _pod_samples(self, holders: dict[str, set[Holder]], index_of: dict[str, str]) -> list[Sample]:
        return [
            Sample(c.GPU_POD_INFO, (index_of[uuid], uuid, self._hostname, *_labels(holder)), 1)
            for uuid, held in sorted(holders.items())
            if uuid in index_of
            for holder in sorted(held)
        ]

    def _slice_samples(
        self, slices: dict[tuple[str, MigSlice], set[Holder]], index_of: dict[str, str]
    ) -> list[Sample]:
        """Each MIG slice's containers (mixed strategy), with the slice and its parent GPU."""
        return [
            Sample(c.GPU_MIG_POD_INFO, (index_of[uuid], uuid, self._hostname, *carved, *_labels(holder)), 1)
            for (uuid, carved), held in sorted(slices.items())
            if uuid in index_of
            for holder in sorted(held)
        ]

    def _process_samples(self, holders: dict[str, set[Holder]], index_of: dict[str, str]) -> list[Sample]:
        # A PID on a GPU that one container holds is that container's; on a shared GPU it is not told.
        samples = []
        for _, uuid, pid in sorted(self._directory.processes()):
            held = holders.get(uuid, set())
            if len(held) == 1 and uuid in index_of:
                (holder,) = held
                labels = (index_of[uuid], uuid, self._hostname, str(pid), *_labels(holder))
                samples.append(Sample(c.GPU_PROCESS_POD_INFO, labels, 1))
        return samples

    def _log_change(self, holders: dict[str, set[Holder]]) -> None:
        pods = frozenset(holder for held in holders.values() for holder in held)
        if pods != self._last_pods:
            names = sorted(f"{h.namespace}/{h.pod}/{h.container}" for h in pods)
            log.info(
                "kubelet %s: %d GPU(s) held by %s", self._socket, len(holders), ", ".join(names) or "none"
            )
            self._last_pods = pods

    def close(self) -> None:
        self._client.close()


def _labels(holder: Holder) -> tuple[str, str, str]:
    return holder.namespace, holder.pod, holder.container


def _allocatable_samples(allocatable: pb.AllocatableResourcesResponse | None) -> list[Sample]:
    if allocatable is None:
        return []
    counts: dict[str, int] = {}
    for devices in allocatable.devices:
        if not is_gpu_resource(devices.resource_name):
            continue
        counts[devices.resource_name] = counts.get(devices.resource_name, 0) + len(devices.device_ids)
    return [Sample(c.ALLOCATABLE_DEVICES, (resource,), n) for resource, n in sorted(counts.items())]
