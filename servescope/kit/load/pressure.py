"""How busy this machine's CPUs are: Linux pressure stall information, quoted beside a client's cost."""

from __future__ import annotations

from pathlib import Path

PSI_CPU = Path("/proc/pressure/cpu")


def cpu_pressure(source: Path = PSI_CPU) -> float:
    """Percent of the last 10 s in which some runnable task waited for a CPU; 0 where PSI is absent."""
    try:
        some = source.read_text().splitlines()[0]
        fields = dict(item.split("=", 1) for item in some.split()[1:] if "=" in item)
        return float(fields.get("avg10", 0.0))
    except (OSError, IndexError, ValueError):
        return 0.0
