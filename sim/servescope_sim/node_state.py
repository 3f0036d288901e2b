"""The simulated node's driven state, shared with the fake `dcgmi` so that both tools watch one node.

On a real node the DCGM host engine reads the same GPUs NVML does. The fake `dcgmi` runs in its own
process with a fleet of its own, which scenarios never reach: without this file its SM activity and
NVLink counters would follow the undisturbed load while NVML shows the fault. The exporter's simulated
node writes what scenarios drive (load, memory activity, NVLink error counts) once a second; the fake
reads it before each row. A missing or unreadable file leaves the fake on its own dynamics.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from servescope_sim.fleet import SimulatedFleet

log = logging.getLogger(__name__)

STATE_ENV = "SERVESCOPE_FAKE_DCGMI_STATE"
WRITE_EVERY_SECONDS = 1.0


def snapshot(fleet: SimulatedFleet) -> dict[str, Any]:
    """Per GPU index: what the fake `dcgmi` derives its values from."""
    fleet.advance()
    with fleet.lock:
        return {
            str(gpu.index): {
                "utilization": gpu.utilization,
                "memory_activity": gpu.memory_activity,
                "nvlink_errors": [[link, kind, value] for (link, kind), value in gpu.nvlink_errors.items()],
            }
            for gpu in fleet.gpus
        }


def write(fleet: SimulatedFleet, path: Path) -> None:
    """Replace `path` atomically, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as out:
        json.dump(snapshot(fleet), out)
    Path(tmp).replace(path)


def apply(fleet: SimulatedFleet, path: Path) -> bool:
    """Overlay the written state on `fleet`'s GPUs; False (fleet untouched) when there is none to read."""
    try:
        state = json.loads(path.read_text())
        with fleet.lock:
            for gpu in fleet.gpus:
                written = state.get(str(gpu.index))
                if written is None:
                    continue
                gpu.utilization = float(written["utilization"])
                gpu.memory_activity = float(written["memory_activity"])
                gpu.nvlink_errors = {(int(lk), int(kd)): float(v) for lk, kd, v in written["nvlink_errors"]}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


class StateWriter:
    """Writes the fleet's state once a second until stopped; the file is removed at stop."""

    def __init__(self, fleet: SimulatedFleet, path: Path) -> None:
        self.fleet, self.path = fleet, path
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-node-state", daemon=True)

    def start(self) -> None:
        write(self.fleet, self.path)  # before the fake `dcgmi` reads its first row
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(2.0)
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stopped.wait(WRITE_EVERY_SECONDS):
            try:
                write(self.fleet, self.path)
            except OSError as exc:  # a full or vanished temp folder: the fake keeps its own dynamics
                log.warning("simulated node state not written to %s: %s", self.path, exc)
