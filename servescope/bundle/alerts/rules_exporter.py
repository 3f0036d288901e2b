"""Alerts about what the exporter refuses or cannot see: engine pages past its limits, engines it cannot
reach from where it runs, and (evaluated where agents remote-write) an agent shard gone silent. Each is
a ticket: none is a user-visible symptom, each is a blind spot of the monitoring."""

from __future__ import annotations

from servescope.bundle.alerts.model import Alert, Group
from servescope.core.catalog import bounds
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel
from servescope.core.vllm.reach import REACH_FAILURES


def series_dropped(cfg: AlertsConfig) -> str:
    dropped = sel(cfg, bounds.SERIES_DROPPED.name)
    window = cfg.series_dropped_window
    return f"sum by (job, instance, endpoint, reason) (increase({dropped}[{window}])) > 0"


def engines_unreachable(cfg: AlertsConfig) -> str:
    """Nodes whose GPU processes run engines the exporter cannot reach, with no engine scraped there."""
    outcomes = bounds.DISCOVERY_GPU_PROCESSES.name
    failing = sel(cfg, outcomes, f'reason=~"{"|".join(sorted(REACH_FAILURES))}"')
    scraped = sel(cfg, outcomes, 'reason="scraped"')
    return f"max by (job, instance, reason) ({failing}) > 0 unless on (job, instance) ({scraped} > 0)"


def agent_shard_silent(cfg: AlertsConfig) -> str:
    """Shards that sent nothing for agent_silence_window while nodes they scraped within
    agent_history_window are scraped by no shard now.

    The remote-written `up` carries the shard's external labels (prometheus-operator: `prometheus` and
    `prometheus_replica`, the pod). A shard removed on purpose hands its targets to the others, a node
    removed leaves its shard sending for the rest: neither is a silent shard whose nodes went blind.
    """
    shard = ", ".join(cfg.agent_shard_labels)
    up = f'up{{{cfg.selector},{cfg.agent_shard_labels[-1]}!=""}}'
    had = f"max by ({shard}, instance) (max_over_time({up}[{cfg.agent_history_window}]))"
    now = f"count_over_time({up}[{cfg.agent_silence_window}])"
    blind = f"{had} unless on (instance) max by (instance) ({now})"
    return f"count by ({shard}) ({blind}) unless on ({shard}) count by ({shard}) ({now})"


def exporter(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts, read top to bottom: longer than 40 lines on purpose.
    reasons = ", ".join(sorted(REACH_FAILURES))
    replica = cfg.agent_shard_labels[-1]
    return Group(
        "servescope-exporter",
        (
            Alert(
                "ServescopeServingSeriesDropped",
                series_dropped(cfg),
                cfg.series_dropped_for,
                "warning",
                "An engine's /metrics page breaks the exporter's limits: series past them are dropped.",
                "{{ $labels.endpoint }} on {{ $labels.instance }}: {{ $value | humanize }} samples dropped "
                f"over {cfg.series_dropped_window} ({{{{ $labels.reason }}}}). Its series past the limits "
                "are not exported; the limits keep the exporter's memory bounded.",
                ("instance", "endpoint", "reason"),
                "exporter",
            ),
            Alert(
                "ServescopeServingEnginesUnreachable",
                engines_unreachable(cfg),
                cfg.engines_unreachable_for,
                "warning",
                "A node runs serving engines that its exporter cannot reach: none is scraped.",
                "On {{ $labels.instance }}, GPU processes run engines that discovery cannot scrape "
                f"({{{{ $labels.reason }}}}; one of {reasons}) and no engine is scraped: every serving "
                "alert of that node is blind. /api/v1/sources on the exporter says what to fix.",
                ("instance", "reason"),
                "exporter",
            ),
            Alert(
                "ServescopeAgentShardSilent",
                agent_shard_silent(cfg),
                cfg.agent_silent_for,
                "warning",
                "An agent shard stopped remote-writing: the nodes it scraped are blind.",
                f"Agent {{{{ $labels.{replica} }}}} has sent nothing for {cfg.agent_silence_window}, and "
                "{{ $value }} node(s) it scraped are scraped by no shard now: their GPU and serving alerts "
                "cannot fire.",
                cfg.agent_shard_labels,
                "exporter",
            ),
        ),
    )
