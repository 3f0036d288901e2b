"""`dcgmi discovery -l`: DCGM GPU ids -> UUIDs, for GPUs NVML did not name (no NVML source)."""

from __future__ import annotations

import re

_ROW_ID = re.compile(r"^\|\s*(\d+)\s*\|")
_UUID = re.compile(r"Device UUID:\s*(GPU-[0-9a-fA-F-]+)")


def parse_discovery(text: str) -> dict[str, str]:
    """Map each `| <id> |` block to the `Device UUID:` that follows it."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        row = _ROW_ID.match(line)
        if row:
            current = row.group(1)
        uuid = _UUID.search(line)
        if uuid and current is not None:
            found[current] = uuid.group(1)
    return found
