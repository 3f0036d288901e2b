"""The scenarios of the simulated node, by name: the one place their names are declared.

`serve --simulate --scenario`, `servescope demo --scenario`, `servescope sim scenarios` and the tests all
take their names from SCENARIOS here.

SERVESCOPE_SIM_LEAK_MIB_PER_MINUTE, when set, replaces the pace's leak rate (memory-leak and tour): an
end-to-end test that must see the leak end in OOM sooner sets it for `servescope demo`, whose exporter
inherits it and whose printed timeline says the same rate.
"""

from __future__ import annotations

import os

from servescope.sim.fault_scenarios import fault_scenario
from servescope.sim.scenarios import (
    PACES,
    HardwareFaults,
    KvPressure,
    MemoryLeak,
    Scenario,
    Steady,
    TrafficRamp,
)

LEAK_ENV = "SERVESCOPE_SIM_LEAK_MIB_PER_MINUTE"
# "none" (the exporter's default) is no scenario at all: the fleet's own slow daily-like wave.
NO_SCENARIO = "none"
SCENARIOS: tuple[str, ...] = (
    "steady",
    "memory-leak",
    "traffic-ramp",
    "kv-pressure",
    "hardware-faults",
    "nvlink-crc",
    "gpu-lost",
    "vllm-down",
    "tour",
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
    if name == "steady":
        return Steady()
    if name == "memory-leak":
        return MemoryLeak(gpu=gpu, leak_mib_per_minute=leak)
    if name == "traffic-ramp":
        return TrafficRamp(ramp_seconds=ramp_seconds)
    if name == "kv-pressure":
        gpus = tuple(layout[0]) if layout else None
        return KvPressure(engine=0, gpus=gpus, ramp_seconds=speed.kv_ramp_seconds)
    if name == "hardware-faults":
        return HardwareFaults()
    if name in SCENARIOS:
        return fault_scenario(name, speed, layout or [], leak)
    raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")


def leak_from_environment() -> float | None:
    """The leak rate LEAK_ENV asks for (MiB per minute), None when unset; ValueError naming it if bad."""
    text = os.environ.get(LEAK_ENV, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{LEAK_ENV}={text!r}: not a number of MiB per minute") from None
