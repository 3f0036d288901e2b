"""A stand-in for `dcgmi`, driven by the simulated fleet, for tests and the demo.

    servescope-fake-dcgmi dmon [--host HOST[:PORT]] -e 409,1009 -d 1000 [-c N]
    servescope-fake-dcgmi dmon -l
    servescope-fake-dcgmi discovery -l

Behaviour is chosen with environment variables, so a test can make it misbehave the ways the real
one does: SERVESCOPE_FAKE_DCGMI_LAYOUT (2.3, 3.3, 4.4, 4.5), _MODE (stream, hang, unreachable,
watch_error: refuses profiling fields), _EXIT_AFTER (iterations, then exit 1), _HANG_AFTER
(iterations, then silence), _NA (field ids always N/A), _INVALID (field
ids this "DCGM" does not know), _GPUS, _MODEL, _SEED (the simulated fleet, as in `serve --simulate`),
_HOSTS (the remote host engines `--host` reaches, comma-separated; unset: any).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from servescope.core.dcgm.dmon_format import (
    HEADER_EVERY,
    LAYOUTS,
    NA,
    Column,
    Layout,
    render_header,
    render_row,
)
from servescope.core.dcgm.field_table import KNOWN, short_name
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.node_state import STATE_ENV, apply
from servescope_sim.sim_gpu import SimGpu

ENV = "SERVESCOPE_FAKE_DCGMI_"
MIB = 1024 * 1024


def _ids(name: str) -> set[int]:
    text = os.environ.get(ENV + name, "")
    return {int(x) for x in text.split(",") if x.strip()}


def _nvlink_total(gpu: SimGpu, counter: int) -> float:
    return sum(v for (_, kind), v in gpu.nvlink_errors.items() if kind == counter)


# field id -> value from the simulated GPU (None: N/A on this GPU model)
VALUES: dict[int, Callable[[SimGpu], float | None]] = {
    100: lambda g: round(g.sm_clock_mhz),
    101: lambda g: g.model.memory_clock_mhz,
    140: lambda g: round(g.temperature + 6),
    150: lambda g: round(g.temperature),
    155: lambda g: round(g.power_watts, 3),
    156: lambda g: int(g.energy_mj),
    202: lambda g: g.pcie_replays,
    203: lambda g: round(g.utilization * 100),
    204: lambda g: round(g.memory_activity * 100),
    230: lambda g: 0,
    240: lambda g: 0,
    241: lambda g: 0,
    250: lambda g: g.model.memory_bytes // MIB,
    251: lambda g: (g.model.memory_bytes - g.used_bytes) // MIB,
    252: lambda g: (g.used_bytes - g.model.reserved_bytes) // MIB,
    253: lambda g: g.model.reserved_bytes // MIB,
    **{fid: (lambda g: 0) for fid in (310, 311, 312, 313, 393, 394, 395, 396)},
    409: lambda g: int(_nvlink_total(g, 2)),
    419: lambda g: int(_nvlink_total(g, 3)),
    429: lambda g: int(_nvlink_total(g, 0)),
    439: lambda g: int(_nvlink_total(g, 1)),
    497: lambda g: int(_nvlink_total(g, 2) + _nvlink_total(g, 3)),
    498: lambda g: int(_nvlink_total(g, 1)),
    499: lambda g: int(_nvlink_total(g, 0)),
    1001: lambda g: round(g.utilization * 0.97, 3),
    1002: lambda g: round(g.utilization * 0.9, 3),
    1003: lambda g: round(g.utilization * 0.45, 3),
    1004: lambda g: round(g.utilization * 0.6, 3),
    1005: lambda g: round(g.memory_activity, 3),
    # NVLink5 counters: the fake answers them (a Blackwell-like host) whenever they are asked for.
    1206: lambda g: int(_nvlink_total(g, 2) + _nvlink_total(g, 3)),
    1209: lambda g: 0,
    1212: lambda g: 0,
    1009: lambda g: int(g.utilization * 4.2e9),
    1010: lambda g: int(g.utilization * 2.1e9),
    1011: lambda g: int(g.utilization * 1.6e11) if g.nvlinks else None,
    1012: lambda g: int(g.utilization * 1.6e11) if g.nvlinks else None,
}


def _no_value(gpu: SimGpu) -> None:
    return None


def _format(value: float | None) -> str:
    if value is None:
        return NA
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}"
    return str(int(value))


def _width(field_id: int) -> int:
    """Display widths in the spirit of dmon's: byte rates are wide, activity ratios narrow."""
    if field_id in (1009, 1010, 1011, 1012):
        return 20
    if field_id in range(1001, 1009):
        return 5
    return 12 if field_id == 156 else max(len(short_name(field_id)), 8)


def columns(ids: list[int]) -> list[Column]:
    """The dmon columns of the watched field ids."""
    return [Column(short_name(fid), _width(fid)) for fid in ids]


def row_values(gpu: SimGpu, ids: list[int], na: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """One GPU's dmon cells, as the real dcgmi prints them (`na`: fields without a value now)."""
    return [NA if fid in na else _format(VALUES.get(fid, _no_value)(gpu)) for fid in ids]


def _fleet() -> SimulatedFleet:
    return SimulatedFleet(
        int(os.environ.get(ENV + "GPUS", "8")),
        os.environ.get(ENV + "MODEL", "H200"),
        int(os.environ.get(ENV + "SEED", "1")),
    )


def dmon(ids: list[int], delay_ms: int, count: int, layout: Layout, host: str = "localhost") -> int:
    invalid = [fid for fid in ids if fid in _ids("INVALID") or fid not in KNOWN]
    if invalid:
        print(
            f"Error: Got invalid field ID. '{invalid[0]}'. See dcgm_fields.h for a list of valid field IDs.",
            file=sys.stderr,
            flush=True,
        )
        return 255
    mode = os.environ.get(ENV + "MODE", "stream")
    # A remote host engine (--host) answers only where the fake is told it runs (HOSTS, comma-separated).
    reachable = os.environ.get(ENV + "HOSTS")
    if mode == "unreachable" or (
        host != "localhost" and reachable is not None and host not in reachable.split(",")
    ):
        print(f"Error: unable to establish a connection to the specified host: {host}", flush=True)
        print(
            "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
            flush=True,
        )
        return 235
    cols = columns(ids)
    header = render_header(layout, cols)
    print("\n".join(header), flush=True)
    if mode == "watch_error" and any(fid in range(1001, 1013) for fid in ids):
        # A host without the profiling module refuses the whole watch when one profiling field is in it.
        print("Error setting watches. Result: -6: Feature not supported", flush=True)
        return 250
    if mode == "hang":
        time.sleep(3600)
        return 0
    return _stream(ids, delay_ms, count, layout, cols)


def _stream(ids: list[int], delay_ms: int, count: int, layout: Layout, cols: list[Column]) -> int:
    """A row per GPU every `delay_ms` (`count` times, 0: forever), the header repeated as dcgmi does."""
    header = render_header(layout, cols)
    fleet, always_na = _fleet(), _ids("NA")
    exit_after = int(os.environ.get(ENV + "EXIT_AFTER", "0"))
    hang_after = int(os.environ.get(ENV + "HANG_AFTER", "0"))
    iteration = 0
    node_state = os.environ.get(STATE_ENV)
    while count == 0 or iteration < count:
        if iteration and iteration % HEADER_EVERY == 0:
            print(("\n" if layout.blank_before_repeat else "") + "\n".join(header), flush=True)
        fleet.advance()
        if node_state:
            apply(fleet, Path(node_state))
        # Profiling fields have no value in the first iteration, as on a real host engine.
        na = always_na | (set(range(1001, 1013)) if iteration == 0 else set())
        for gpu in fleet.gpus:
            values = row_values(gpu, ids, na)
            print(render_row(layout, f"GPU {gpu.index}", cols, values), flush=True)
        iteration += 1
        if exit_after and iteration >= exit_after:
            return 1
        if hang_after and iteration >= hang_after:
            time.sleep(3600)  # a hung host engine: alive, silent
        time.sleep(delay_ms / 1000)
    return 0


def list_fields() -> None:
    print("_" * 84)
    print(f"{'Long Name':>44}{'Short Name':>20}{'Field ID':>20}")
    print("_" * 84)
    for fid, known in sorted(KNOWN.items()):
        print(f"{known.name.removeprefix('DCGM_FI_').lower():<50}{known.short or '':>14}{fid:>20}")


def discovery() -> None:
    fleet = _fleet()
    print(f"{len(fleet.gpus)} GPUs found.")
    rule = "+--------+" + "-" * 70 + "+"
    print(rule)
    print(f"| GPU ID | {'Device Information':<69}|")
    print(rule)
    for gpu in fleet.gpus:
        print(f"| {gpu.index:<7}| {'Name: ' + gpu.model.name:<69}|")
        print(f"|        | {'PCI Bus ID: ' + gpu.pci_bus_id:<69}|")
        print(f"|        | {'Device UUID: ' + gpu.uuid:<69}|")
        print(rule)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="servescope-fake-dcgmi",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["dmon", "discovery"])
    parser.add_argument("-e", dest="fields", default="")
    parser.add_argument("-d", dest="delay", type=int, default=1000)
    parser.add_argument("-c", dest="count", type=int, default=0)
    parser.add_argument("-i", dest="entities", default="")
    parser.add_argument("-l", dest="list", action="store_true")
    parser.add_argument("--host", dest="host", default="localhost")
    args = parser.parse_args(argv)
    try:
        if args.command == "discovery":
            discovery()
            return 0
        if args.list:
            list_fields()
            return 0
        try:
            ids = [int(x) for x in args.fields.split(",") if x]
        except ValueError:
            print(f"Error: Expected numerical fieldId. Got '{args.fields}' instead.", file=sys.stderr)
            return 255
        return dmon(ids, args.delay, args.count, LAYOUTS[os.environ.get(ENV + "LAYOUT", "4.5")], args.host)
    except (BrokenPipeError, KeyboardInterrupt):
        # The reader went away (the exporter killed us, or `| head`): leave quietly.
        with contextlib.suppress(OSError):
            sys.stdout = Path(os.devnull).open("w")  # noqa: SIM115
        return 0


if __name__ == "__main__":
    sys.exit(main())
