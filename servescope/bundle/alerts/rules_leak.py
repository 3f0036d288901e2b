"""A leak verdict normalised by load: GPU memory regressed on the GPU's load, and the growth the load does
not explain.

Memory that follows traffic (activations sized up with the batch, a cache that grows with the day) rises
with every busy morning; a leak rises whatever the load. Over leak_fit_window each GPU's memory is fitted as
`a + k x load` (k from the window's covariance, never negative, 0 when the load did not move); what is
left, `memory - k x load`, is flat for memory that follows the load and grows for a leak. A leak under a
rising load is partly taken for load while the ramp lasts (the two cannot be told apart then) and shows as
soon as the load stops rising.

The fit only explains loads it has seen. A load that steps outside them (a KV-pressure episode
saturating the GPU, a new day's peak, any step in a GPU's first minutes, when the fit holds one 5-minute
sample or none) meets a `k` fitted without it, often 0 because the load had not moved yet: memory that
follows the step reads as growth the load does not explain. So growth is judged only where the load held
still over both halves (its standard deviation under leak_load_wander, about how much a flat load's
10-minute means wander: such a load explains little growth, whatever `k`), or where at every minute of
them the load lay within the loads the fit had read, give or take leak_load_wander
(`gpu:servescope_busy_within_fit:bool`). A leak grows whatever the load: it shows as soon as the load
holds still or comes back where the fit has been.

The load is the GPU's busy share (DCGM SM activity where reported, else NVML utilisation): the batch it
runs, for every GPU, in both topologies. Both are taken as 10-minute means.
"""

from __future__ import annotations

from servescope.bundle.alerts.exprs import GPU_BY, SM_ACTIVE
from servescope.bundle.alerts.model import Group, Record, record_name
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.durations import format_duration, parse_duration
from servescope.core.topology import sel

MEMORY = record_name("gpu", "memory_used", "bytes")
LOAD = record_name("gpu", "busy", "ratio")
MEMORY_TIMES_LOAD = record_name("gpu", "memory_used_times_busy", "product")
LOAD_SQUARED = record_name("gpu", "busy", "square")
PER_LOAD = record_name("gpu", "memory_per_busy", "bytes")
UNEXPLAINED = record_name("gpu", "memory_unexplained", "bytes")
WITHIN_FIT = record_name("gpu", "busy_within_fit", "bool")
INTERVAL, FIT_STEP = "1m", "5m"  # records every minute; the fit reads them every 5
# Memory and load are fitted on their 10-minute means: a busy share sampled from NVML wavers by a few
# points around a flat load, and regressing on that noise makes a leak's growth look like load.
SMOOTHING = "10m"


def _busy(cfg: AlertsConfig) -> str:
    sm = f"max by ({GPU_BY}) (avg_over_time({sel(cfg, SM_ACTIVE)}[{SMOOTHING}]))"
    nvml = f"max by ({GPU_BY}) (avg_over_time({sel(cfg, c.UTILIZATION.name)}[{SMOOTHING}]))"
    return f"({sm} or on (instance, uuid) {nvml})"


def records(cfg: AlertsConfig) -> Group:
    """Each GPU's memory and load every minute, the fitted bytes per unit of load, and the remainder."""
    w = cfg.leak_fit_window

    def mean(name: str) -> str:
        # Every FIT_STEP: a day of a GPU's minutes is 1,440 samples per record, read every minute.
        return f"avg_over_time({name}[{w}:{FIT_STEP}])"

    seen, margin = f"{LOAD}[{w}:{FIT_STEP}]", f"{cfg.leak_load_wander:g}"
    # 1 when this minute's load lies within the loads the fit read, give or take how a flat load's means
    # wander; 0 when the fit extrapolates to it, or has read nothing yet.
    within = (
        f"{LOAD} <= on ({GPU_BY}) max_over_time({seen}) + {margin}"
        f" and on ({GPU_BY}) {LOAD} >= on ({GPU_BY}) min_over_time({seen}) - {margin}"
    )
    covariance = f"({mean(MEMORY_TIMES_LOAD)} - {mean(MEMORY)} * {mean(LOAD)})"
    variance = f"({mean(LOAD_SQUARED)} - {mean(LOAD)} ^ 2)"
    moving = f"{variance} > {cfg.leak_min_load_stddev**2:g}"
    flat = f"on ({GPU_BY}) 0 * {MEMORY}"  # a load that did not move explains nothing
    used = f"avg_over_time({sel(cfg, c.MEMORY_USED.name)}[{SMOOTHING}])"
    return Group(
        "servescope-memory-trend",
        (
            Record(MEMORY, f"max by ({GPU_BY}) ({used})"),
            Record(LOAD, _busy(cfg)),
            Record(MEMORY_TIMES_LOAD, f"{MEMORY} * on ({GPU_BY}) {LOAD}"),
            Record(LOAD_SQUARED, f"{LOAD} ^ 2"),
            Record(PER_LOAD, f"clamp_min({covariance} / on ({GPU_BY}) ({moving}), 0) or {flat}"),
            Record(UNEXPLAINED, f"{MEMORY} - on ({GPU_BY}) {PER_LOAD} * on ({GPU_BY}) {LOAD}"),
            Record(WITHIN_FIT, f"0 * ({within}) + 1 or on ({GPU_BY}) 0 * {LOAD}"),
        ),
        interval=INTERVAL,
    )


def leaking(cfg: AlertsConfig) -> str:
    """GPUs whose unexplained memory grows faster than leak_min_bytes_per_minute (the value, bytes/min over
    the last leak_growth_window) in both halves of twice that window: a leak grows all the time, a step
    (a model reloaded, a cache warming up) once, and an allocator's sawtooth averages out. Judged only
    where those halves' load held still or stayed where the fit had seen it (the module's docstring)."""
    w, bound = cfg.leak_growth_window, f"{cfg.leak_min_bytes_per_minute:.0f}"
    halves, margin = format_duration(2 * parse_duration(w)), f"{cfg.leak_load_wander:g}"
    growth = f"deriv({UNEXPLAINED}[{w}]) * 60"
    judged = f"stddev_over_time({LOAD}[{halves}]) < {margin} or min_over_time({WITHIN_FIT}[{halves}]) == 1"
    return (
        f"{growth} > {bound} and on ({GPU_BY}) deriv({UNEXPLAINED}[{w}] offset {w}) * 60 > {bound}"
        f" and on ({GPU_BY}) ({judged})"
    )
