"""What the collector knows about one GPU between cycles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Gpu:
    index: int
    uuid: str
    handle: Any
    labels: tuple[str, str, str]  # gpu, uuid, hostname: the label prefix of every per-GPU series
    model: str = ""
    pci_bus_id: str = ""
    mig_mode: str = "unknown"
    links: list[int] = field(default_factory=list)
    up: bool = True
