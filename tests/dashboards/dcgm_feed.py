"""The production DCGM source on a fake clock: `dcgmi dmon` rows written when a scrape asks for them.

The source, its supervisor and its reader threads run unchanged; only the child is an in-process
stand-in whose stdout carries the rows the fake dcgmi would print for the simulated fleet, in the dmon
format of DCGM 4.5. A collection writes one row per GPU still on the bus, and waits (real time) until
the reader has asked for the line after the last one, so every row is parsed before the source reads
its latest values: the result does not depend on thread timing.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence

from servescope.core.dcgm.counters import load_counters
from servescope.core.dcgm.dmon_format import LAYOUTS, render_header, render_row
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import Collection, SourceError
from servescope_sim.fake_dcgmi import columns, row_values
from servescope_sim.fleet import SimulatedFleet

LAYOUT = LAYOUTS["4.5"]
READ_TIMEOUT_SECONDS = 10.0


class LineStream:
    """A child's stdout fed from this process; counts how many lines the reader has asked for."""

    def __init__(self) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._asked = 0
        self._written = 0
        self._changed = threading.Condition()

    def __iter__(self) -> LineStream:
        return self

    def __next__(self) -> str:
        with self._changed:
            self._asked += 1
            self._changed.notify_all()
        line = self._lines.get()
        if line is None:
            raise StopIteration
        return line

    def readline(self, limit: int = -1) -> str:
        """One line as a file's readline gives it ("" at the end); the feed's lines are short."""
        try:
            return next(self)
        except StopIteration:
            return ""

    def put(self, lines: Sequence[str]) -> None:
        for line in lines:
            self._lines.put(line + "\n")
        self._written += len(lines)

    def write(self, lines: Sequence[str]) -> None:
        """Queue `lines`, then wait until the reader asks for the next one: all of them are parsed."""
        self.put(lines)
        with self._changed:
            parsed = self._changed.wait_for(lambda: self._asked > self._written, READ_TIMEOUT_SECONDS)
        if not parsed:
            raise AssertionError(f"the DCGM reader took {len(lines)} rows but did not parse them")

    def close(self) -> None:
        self._lines.put(None)


class FedDmon:
    """`dcgmi dmon` as the supervisor sees a child: no process (pid 0), rows on `stdout`."""

    pid = 0
    stderr = None

    def __init__(self, argv: Sequence[str]) -> None:
        self.ids = [int(fid) for fid in argv[list(argv).index("-e") + 1].split(",")]
        self.stdout = LineStream()
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        return self.code if self.code is not None else 0

    def kill(self) -> None:
        if self.code is None:
            self.code = -9
            self.stdout.close()


class DcgmFeed:
    """The `dcgm` source of one simulated node, fed at every collection from the node's fleet."""

    name = "dcgm"

    def __init__(
        self,
        fleet: SimulatedFleet,
        directory: GpuDirectory,
        hostname: str,
        interval_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.interval_seconds = interval_seconds
        self._fleet = fleet
        self._child: FedDmon | None = None
        self.source = DmonSource(
            load_counters(),
            hostname=hostname,
            directory=directory,
            interval_seconds=interval_seconds,
            spawn=self._spawn,
            clock=clock,
        )

    def _spawn(self, argv: Sequence[str]) -> FedDmon:
        child = FedDmon(argv)
        self._child = child
        # Called by the supervisor before it starts the reader: queue the lines, do not wait for them.
        child.stdout.put([*render_header(LAYOUT, columns(child.ids)), *self._rows(child)])
        return child

    def _rows(self, child: FedDmon) -> list[str]:
        cols = columns(child.ids)
        with self._fleet.lock:
            # A GPU that fell off the bus is not in the host engine's rows any more.
            return [
                render_row(LAYOUT, f"GPU {gpu.index}", cols, row_values(gpu, child.ids))
                for gpu in self._fleet.gpus
                if not gpu.lost
            ]

    def collect(self) -> Collection:
        if self._child is None:
            # Starts the supervisor, which spawns the child; the collection below is the one that counts.
            with contextlib.suppress(SourceError):
                self.source.collect()
        child = self._child
        if child is not None and child.code is None:
            child.stdout.write(self._rows(child))
        return self.source.collect()

    def close(self) -> None:
        self.source.close()
