"""Which GPU is which: index -> UUID as NVML enumerated it, and who holds it (the kubelet's answer),
shared by the sources that need labels."""

from __future__ import annotations

import threading
from collections.abc import Iterable

# The pod labels of a series no single container can be named for: left empty (the renderer drops them).
NO_POD = ("", "", "")


class GpuDirectory:
    """Written by the NVML source at each (re-)initialisation; read by DCGM and, later, the engine join."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uuids: dict[str, str] = {}
        self._processes: dict[str, frozenset[int]] = {}  # uuid -> compute PIDs (host namespace)
        self._holders: dict[str, frozenset[tuple[str, str, str]]] = {}  # uuid -> (namespace, pod, container)
        self._listed = False  # whether _holders is a kubelet's answer

    def update(self, uuids_by_index: dict[str, str]) -> None:
        with self._lock:
            self._uuids.update(uuids_by_index)

    def uuid(self, index: str) -> str | None:
        with self._lock:
            return self._uuids.get(index)

    def known(self) -> dict[str, str]:
        with self._lock:
            return dict(self._uuids)

    def set_processes(self, uuid: str, pids: frozenset[int]) -> None:
        with self._lock:
            self._processes[uuid] = pids

    def set_holders(
        self, holders: dict[str, frozenset[tuple[str, str, str]]], *, listed: bool = True
    ) -> None:
        """The containers holding each GPU, as the kubelet's pod-resources last listed them; `listed` is
        False when the kubelet could not be asked (nothing is known then, not "no pod")."""
        with self._lock:
            self._holders = dict(holders)
            self._listed = listed

    def listed_pods(self) -> frozenset[tuple[str, str]] | None:
        """(namespace, pod) of every pod the kubelet's last answer had holding a GPU of this node; None
        when the kubelet was never asked or did not answer."""
        with self._lock:
            if not self._listed:
                return None
            return frozenset((ns, pod) for held in self._holders.values() for ns, pod, _ in held)

    def sole_holder(self, uuids: Iterable[str]) -> tuple[str, str, str]:
        """The one container the kubelet allocated all these GPUs to; NO_POD when there is none or more
        than one, or when a GPU has no holder (a time-sliced GPU's processes could be anyone's)."""
        with self._lock:
            held = [self._holders.get(uuid, frozenset()) for uuid in uuids]
        holders = frozenset().union(*held)
        if not held or not all(held) or len(holders) != 1:
            return NO_POD
        (holder,) = holders
        return holder

    def holders(self, uuid: str) -> frozenset[tuple[str, str, str]]:
        with self._lock:
            return self._holders.get(uuid, frozenset())

    def processes(self) -> list[tuple[str, str, int]]:
        """(gpu index, uuid, pid) for every compute process NVML reported in its last cycle."""
        with self._lock:
            index_of = {uuid: index for index, uuid in self._uuids.items()}
            return [
                (index_of.get(uuid, ""), uuid, pid) for uuid, pids in self._processes.items() for pid in pids
            ]
