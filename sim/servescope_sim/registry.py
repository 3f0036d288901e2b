"""The scenarios of the simulated node, by name: the one place their names are declared.

`serve --simulate --scenario`, `servescope sim scenarios` and the tests all take their names from
SCENARIOS here, which lists each scenario class's `name`; `servescope demo --scenario` takes them from
DEMO_SCENARIOS, the ones a demo plays.

SERVESCOPE_SIM_LEAK_MIB_PER_MINUTE, when set, replaces the pace's leak rate (memory-leak and tour): an
end-to-end test that must see the leak end in OOM sooner sets it for `servescope demo`, whose exporter
inherits it and whose printed timeline says the same rate. SERVESCOPE_SIM_CANARY_AT (seconds) does the
same for the time the canary scenario's new revision starts (canary_scenario.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from servescope_sim.canary_scenario import Canary, canary
from servescope_sim.fault_scenarios import (
    GpuLost,
    NvlinkCrc,
    Tour,
    VllmDown,
    gpu_lost,
    nvlink_crc,
    tour,
    vllm_down,
)
from servescope_sim.scenarios import (
    PACES,
    HardwareFaults,
    KvPressure,
    MemoryLeak,
    Pace,
    Scenario,
    Steady,
    TrafficRamp,
)

# "none" (the exporter's default) is no scenario at all: the fleet's own slow daily-like wave.
NO_SCENARIO = "none"
LEAK_ENV = "SERVESCOPE_SIM_LEAK_MIB_PER_MINUTE"


@dataclass(frozen=True)
class _Request:
    """What `make_scenario` was asked for, checked."""

    gpu: int
    leak_mib_per_minute: float
    ramp_seconds: float
    pace: Pace
    layout: list[list[int]]


# Each scenario's name is its class's `name`; this table only says how to build it, in listing order.
_BUILDERS: tuple[tuple[type[Scenario], Callable[[_Request], Scenario]], ...] = (
    (Steady, lambda r: Steady()),
    (MemoryLeak, lambda r: MemoryLeak(gpu=r.gpu, leak_mib_per_minute=r.leak_mib_per_minute)),
    (TrafficRamp, lambda r: TrafficRamp(ramp_seconds=r.ramp_seconds)),
    (
        KvPressure,
        lambda r: KvPressure(
            engine=0, gpus=tuple(r.layout[0]) if r.layout else None, ramp_seconds=r.pace.kv_ramp_seconds
        ),
    ),
    (HardwareFaults, lambda r: HardwareFaults()),
    (NvlinkCrc, lambda r: nvlink_crc(r.pace)),
    (GpuLost, lambda r: gpu_lost(r.pace)),
    (VllmDown, lambda r: vllm_down(r.pace, r.layout)),
    (Tour, lambda r: tour(r.pace, r.layout, r.leak_mib_per_minute)),
    (Canary, lambda r: canary(r.pace, r.layout)),
)
_BY_NAME = {kind.name: build for kind, build in _BUILDERS}
SCENARIOS: tuple[str, ...] = tuple(_BY_NAME)
# What `servescope demo` plays, quiet first and then in the tour's order; traffic-ramp and
# hardware-faults exist for detector tests (no demo pace, no story to follow).
DEMO_SCENARIOS: tuple[str, ...] = tuple(
    kind.name for kind in (Steady, KvPressure, MemoryLeak, NvlinkCrc, GpuLost, VllmDown, Tour, Canary)
)


def make_scenario(
    name: str,
    *,
    gpu: int = 0,
    leak_mib_per_minute: float | None = None,
    ramp_seconds: float = 3600.0,
    pace: str = "real",
    layout: list[list[int]] | None = None,
) -> Scenario:
    """The scenario called `name`; ValueError naming the known ones for any other name.

    `layout` is the GPUs of each simulated engine (as `engines.gpu_groups` lays them out): scenarios
    that hit one engine (kv-pressure, vllm-down, tour) then know which GPUs go with it.
    """
    if pace not in PACES:
        raise ValueError(f"unknown pace {pace!r}; known: {', '.join(PACES)}")
    speed = PACES[pace]
    if leak_mib_per_minute is None:
        leak_mib_per_minute = leak_from_environment()
    leak = speed.leak_mib_per_minute if leak_mib_per_minute is None else leak_mib_per_minute
    if gpu < 0:
        raise ValueError(f"gpu must be >= 0, got {gpu}")
    if not 0 < leak < float("inf"):
        raise ValueError(f"leak_mib_per_minute must be > 0, got {leak}")
    if not 0 < ramp_seconds < float("inf"):
        raise ValueError(f"ramp_seconds must be > 0, got {ramp_seconds}")
    build = _BY_NAME.get(name)
    if build is None:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    return build(_Request(gpu, leak, ramp_seconds, speed, layout or []))


def leak_from_environment() -> float | None:
    """The leak rate LEAK_ENV asks for (MiB per minute), None when unset; ValueError naming it if bad."""
    text = os.environ.get(LEAK_ENV, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{LEAK_ENV}={text!r}: not a number of MiB per minute") from None
