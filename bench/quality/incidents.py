"""Incidents several scenario modules share: a GPU saturated, a fleet without spare capacity."""

from __future__ import annotations

from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration

from .scenarios import Busy, Incident


def saturated(cfg: AlertsConfig, gpu: int) -> Incident:
    """GPU `gpu`'s noise-free load over the saturation ratio for at least the alert's `for`."""
    return Incident(
        f"GPU {gpu} saturated",
        Busy(cfg.gpu_saturated_ratio, parse_duration(cfg.gpu_saturated_for), gpu),
        expect=("ServescopeGpuSaturated",),
        gpu=gpu,
    )


def fleet_without_buffer(cfg: AlertsConfig) -> Incident:
    """The node's mean load over 1 - the capacity buffer for the alert's `for`; when it never crosses,
    the alert must stay silent."""
    return Incident(
        "fleet without spare capacity",
        Busy(1 - cfg.capacity_buffer_ratio, parse_duration(cfg.capacity_for)),
        expect=("ServescopeFleetCapacityBufferLow",),
    )
