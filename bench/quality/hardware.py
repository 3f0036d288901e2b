"""What a simulated node of the benchmark is built of, apart from what happens to it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hardware:
    """A node's GPUs, the GPU groups its engines run on, its NVLinks per GPU, and whether its exporter
    watches NVML's XID events (a thread of its own: only the scenarios that lose a GPU need it)."""

    gpus: int
    gpu_model: str
    layout: tuple[tuple[int, ...], ...]
    nvlinks: int | None
    xid_events: bool
