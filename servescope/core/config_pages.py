"""The settings of what pages and how: symptoms, scrape gaps, blindness, planned changes, load-normalised
leaks. `AlertsConfig` inherits them; they are fields of the one config a `--config` file overrides."""

from __future__ import annotations

from pydantic import BaseModel, Field

MIB = 1024 * 1024


class PageSettings(BaseModel):
    """Pages require a symptom (or our own blindness); causes are tickets. The defaults suit a fleet of
    Deployments of vLLM pods on GPU nodes, monitored by kube-prometheus-stack with kube-state-metrics.
    A base of AlertsConfig only, which forbids unknown fields and freezes them all."""

    # --- scrape gaps -------------------------------------------------------------------------------
    page_gap_tolerance: str = Field(
        "10m",
        description="The symptom a page reads is its last sample within this window: a scrape gap shorter "
        "than it neither resolves a page nor fires it again; only a new sample (recovery) resolves it.",
    )
    # --- serving availability ----------------------------------------------------------------------
    availability_objective: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="Share of the time each endpoint that should serve a model answers and makes "
        "progress. Its error ratio is burned against as the latency SLOs' are (14.4x over 1 h and 5 min, "
        "6x over 6 h and 30 min page).",
    )
    endpoint_down_window: str = Field(
        "10m",
        description="An endpoint that should serve and answered less than half of this window is down: a "
        "crash loop that answers a minute between its crashes is as down as a dead engine.",
    )
    endpoint_down_for: str = Field("5m", description="How long an endpoint is down before its ticket.")
    # --- blindness ---------------------------------------------------------------------------------
    blind_share: float = Field(
        0.5,
        description="Share of the fleet's exporters down or absent that pages once for the fleet "
        "(ServescopeMonitoringBlind); fewer are one ticket each (ServescopeExporterDown).",
        gt=0,
        le=1,
    )
    blind_for: str = "5m"
    blind_history: str = Field(
        "6h",
        description="Without kube-state-metrics, the exporters expected are the most there were in this "
        "window (with it: the GPU nodes).",
    )
    targets_absent_for: str = Field(
        "5m", description="No exporter target at all (the DaemonSet deleted): pages within twice this."
    )
    kube_state_metrics: bool = Field(
        True,
        description="Read kube-state-metrics: GPU nodes without an exporter, pods terminating, restarting "
        "or starting, Deployments' unavailable replicas. False: those rules are left out (and so is the "
        "ticket that says kube-state-metrics is missing).",
    )
    planned_change_lag: str = Field(
        "1m",
        description="How late kube-state-metrics may say a pod is being deleted after its engine stopped "
        "(its scrape interval, and more), and how long a deleted pod's target may outlive it there: the "
        "availability ratio is judged this late, so that an engine stopped on purpose never counts.",
    )
    kube_state_metrics_selector: str = Field(
        'job="kube-state-metrics"', description="Label matchers selecting kube-state-metrics' series."
    )
    gpu_node_label: str = Field(
        "label_nvidia_com_gpu_present",
        description="kube_node_labels label of the GPU Operator's node label (nvidia.com/gpu.present; "
        "kube-state-metrics exports it when --metric-labels-allowlist lists it): a GPU node even before "
        "its device plugin reports capacity.",
    )
    node_without_exporter_for: str = Field(
        "15m",
        description="A GPU node without an exporter target this long is a ticket (image pulls take time).",
    )
    kube_state_metrics_absent_for: str = "15m"
    # --- memory leaks, normalised by load ----------------------------------------------------------
    leak_fit_window: str = Field(
        "1d",
        description="Memory is regressed on the GPU's load over this window, long enough to see a daily "
        "cycle (a load that only rises cannot be told from a leak): the growth the load explains (a "
        "diurnal ramp) is taken out before the leak is judged.",
    )
    leak_growth_window: str = Field(
        "30m",
        description="The unexplained memory must grow in both halves of twice this window.",
    )
    leak_min_bytes_per_minute: float = Field(
        4 * MIB, gt=0, description="Unexplained growth (bytes/min) under which memory is not leaking."
    )
    leak_min_load_stddev: float = Field(
        0.01,
        gt=0,
        description="Below this standard deviation of the load over the fit window, the load is flat and "
        "explains no growth.",
    )
    leak_load_wander: float = Field(
        0.03,
        gt=0,
        description="How far the load may wander and still be judged: growth is judged where the load's "
        "standard deviation over both growth halves is under this, or where it stayed within the loads "
        "the fit has seen, give or take this. A flat load's 10-minute means wander by about this much; a "
        "load step the fit has not seen (a KV-pressure episode) by far more, and its memory is not a leak.",
    )
