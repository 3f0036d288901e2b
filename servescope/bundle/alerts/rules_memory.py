"""GPU memory alerts: leaks, exhaustion, headroom and engines over their budget."""

from __future__ import annotations

from servescope.bundle.alerts.exprs import GPU_BY, ON_ENGINE, ON_GPU, gpu_hosts, on_engine_gpus
from servescope.bundle.alerts.model import GPU_KEYS, Alert, Group
from servescope.bundle.alerts.rules_leak import leaking
from servescope.core import catalog as c
from servescope.core.catalog import derived as dm
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

# The GPU memory share vLLM takes when the engine does not say (its default gpu_memory_utilization).
DEFAULT_BUDGET = 0.9


def engine_budget(cfg: AlertsConfig) -> str:
    """Each GPU's engine budget as a share of its memory (gpu_memory_utilization), per (instance, uuid)."""
    setting = sel(cfg, c.GPU_MEMORY_UTILIZATION_SETTING.name)
    return f"max by (instance, uuid) ({on_engine_gpus(cfg, setting)})"


def headroom_bound(cfg: AlertsConfig) -> str:
    """The free share under which a GPU has too little headroom: memory_headroom_ratio, or less where an
    engine's budget leaves less free by design (memory_headroom_budget_share of what it leaves)."""
    total = sel(cfg, c.MEMORY_TOTAL.name)
    share = cfg.memory_headroom_budget_share
    by_engine = f"clamp_max({share:g} * (1 - {engine_budget(cfg)}), {cfg.memory_headroom_ratio:g})"
    default = f"(0 * max by (instance, uuid) ({total}) + {cfg.memory_headroom_ratio:g})"
    return f"({by_engine} or on (instance, uuid) {default})"


def over_budget_bound(cfg: AlertsConfig) -> str:
    """Bytes over budget that alert: over_budget_ratio of the engine's budget, at least over_budget_bytes."""
    setting = sel(cfg, c.GPU_MEMORY_UTILIZATION_SETTING.name)
    total = f"max by (instance, uuid) ({sel(cfg, c.MEMORY_TOTAL.name)})"
    budget = f"{on_engine_gpus(cfg, setting)} * on (instance, uuid) group_left () {total}"
    return f"clamp_min({cfg.over_budget_ratio:g} * {budget}, {cfg.over_budget_bytes:.0f})"


def over_budget(cfg: AlertsConfig) -> str:
    """The engines over their memory budget by more than over_budget_bound, with the GPU's hostname."""
    over = sel(cfg, dm.MEMORY_OVER_BUDGET.name)
    keys = "instance, model_name, engine, endpoint, uuid"
    # Engines that state no gpu_memory_utilization get the floor.
    over_expr = (
        f"{over} > on ({keys}) group_left () {over_budget_bound(cfg)}"
        f" or ({over} > {cfg.over_budget_bytes:.0f} unless on ({keys}) {over_budget_bound(cfg)})"
    )
    # The derived series carries no hostname.
    return f"({over_expr}) * on (instance, uuid) group_left (hostname) {gpu_hosts(cfg)}"


def _headroom_low(cfg: AlertsConfig) -> str:
    """The GPUs whose free share at the 1 s peak is under headroom_bound (the value is that share)."""
    used_peak = sel(cfg, dm.MEMORY_PEAK.name)
    total = sel(cfg, c.MEMORY_TOTAL.name)
    return (
        f"({total} - on ({GPU_BY}) {used_peak}) / on ({GPU_BY}) {total}"
        f" < on (instance, uuid) group_left () {headroom_bound(cfg)}"
    )


def memory(cfg: AlertsConfig) -> Group:
    # One declarative tuple of the group's four alerts, read top to bottom as the bundle's reference:
    # longer than 40 lines on purpose.
    share = cfg.memory_headroom_budget_share
    return Group(
        "servescope-gpu-memory",
        (
            Alert(
                "ServescopeGpuMemoryLeakSuspected",
                leaking(cfg),
                cfg.leak_for,
                "warning",
                "GPU memory grows more than its load explains.",
                f"{ON_GPU}: memory grows {{{{ $value | humanize1024 }}}}B/min more than its load explains "
                f"(memory regressed on the GPU's busy share over {cfg.leak_fit_window}): a leak, not "
                "traffic; /api/v1/gpus on the exporter gives the curve and its own verdict.",
                GPU_KEYS,
                "memory",
            ),
            Alert(
                "ServescopeGpuMemoryExhaustionSoon",
                _exhaustion_expr(cfg),
                cfg.exhaustion_for,
                # A ticket: the OOM to come is a risk; the engine it kills is what users feel, and the
                # availability and latency pages say when they do.
                "warning",
                "GPU memory will run out within the hour at its current growth.",
                f"{ON_GPU} will run out of memory in {{{{ $value | humanizeDuration }}}} at its "
                f"{cfg.exhaustion_window} growth rate.",
                GPU_KEYS,
                "memory",
            ),
            Alert(
                "ServescopeGpuMemoryHeadroomLow",
                _headroom_low(cfg),
                cfg.memory_headroom_for,
                "warning",
                "A GPU has almost no free memory at its peaks.",
                f"{ON_GPU} keeps only {{{{ $value | humanizePercentage }}}} of its memory free at the "
                f"1 s peak (under {cfg.memory_headroom_ratio:.0%}, or under {share:.0%} of what its engine's "
                "gpu_memory_utilization leaves free).",
                GPU_KEYS,
                "memory",
            ),
            Alert(
                "ServescopeEngineOverMemoryBudget",
                over_budget(cfg),
                cfg.over_budget_for,
                "warning",
                "A serving engine holds memory beyond its gpu_memory_utilization budget.",
                f"{ON_ENGINE} holds "
                "{{ $value | humanize1024 }}B beyond its budget on GPU {{ $labels.gpu }} ({{ "
                f"$labels.uuid }}}}), more than {cfg.over_budget_ratio:.0%} of the budget and "
                f"{cfg.over_budget_bytes / 2**30:g} GiB.",
                ("instance", "model_name", "engine", "endpoint", "hostname", "gpu", "uuid"),
                "memory",
            ),
        ),
    )


def _exhaustion_expr(cfg: AlertsConfig) -> str:
    """Time to exhaustion at the configured window's growth, confirmed by the 5 min window.

    The 30 min growth reads a one-off step (activations sized up when load jumps) as growth for as long
    as the step is in its window, and pages on a GPU that has stopped growing; the 5 min growth has
    already gone flat then. A leak is still growing, so both windows agree.
    """
    bound = f"{cfg.exhaustion_seconds:g}"
    exhaustion = sel(cfg, dm.MEMORY_EXHAUSTION.name, f'window="{cfg.exhaustion_window}"')
    if cfg.exhaustion_window == "5m":
        return f"{exhaustion} < {bound}"
    recent = sel(cfg, dm.MEMORY_EXHAUSTION.name, 'window="5m"')
    return f"{exhaustion} < {bound} and on ({GPU_BY}) {recent} < {bound}"
