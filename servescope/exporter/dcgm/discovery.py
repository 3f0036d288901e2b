"""`dcgmi discovery -l`: DCGM GPU ids -> UUIDs, for GPUs NVML did not name (no NVML source)."""

from __future__ import annotations

import logging
import re
import subprocess

log = logging.getLogger(__name__)

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


def discover_uuids(dcgmi: str, host: list[str]) -> dict[str, str]:
    """Ask `dcgmi discovery -l` (on the host engine `host`'s `--host` names, if any); {} when it fails."""
    try:
        done = subprocess.run(
            [dcgmi, "discovery", *host, "-l"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("dcgmi discovery -l failed: %s", exc)
        return {}
    return parse_discovery(done.stdout)
