"""promtool cases for the alerts about what the exporter drops or cannot see (group servescope-exporter).

1 min scrape and evaluation interval. Each alert is checked silent while pending, firing once its `for`
elapsed, and silent again once the cause is gone; beside each, the planned changes of a real fleet that
must not alert: a one-off burst of drops, an engine restarting, an engine scraped beside an unreachable
one, a training node, an agent shard removed by a scale-down, a node removed from the cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import TARGET, case, check, fires, run_promtool, series

DROPPED = "ServescopeServingSeriesDropped"
UNREACHABLE = "ServescopeServingEnginesUnreachable"
SILENT = "ServescopeAgentShardSilent"
DROPS = "servescope_vllm_series_dropped_total"
OUTCOMES = "servescope_vllm_discovery_gpu_processes"
ENDPOINT = {**TARGET, "endpoint": "http://10.0.0.1:8000/metrics"}
QUIET = {**TARGET, "endpoint": "http://10.0.0.2:8000/metrics"}

# A hostile engine drops 500 samples a scrape from 10m to 39m; another drops once, at 10m (a burst).
SERIES_DROPPED = case(
    DROPPED,
    [
        series(DROPS, {**ENDPOINT, "reason": "series_limit"}, "0x9 500+500x29 15000x30"),
        series(DROPS, {**QUIET, "reason": "label_value_length"}, "0x9 40x50"),
    ],
    check(DROPPED, "24m"),  # dropping since 10m: pending
    fires(
        DROPPED,
        "27m",
        {**ENDPOINT, "reason": "series_limit"},
        "http://10.0.0.1:8000/metrics on node-a:9108: 7.5k samples dropped over 15m (series_limit). Its "
        "series past the limits are not exported; the limits keep the exporter's memory bounded.",
    ),
    check(DROPPED, "57m"),  # no drop since 39m: recovered; the one-off burst never fired
)

REASONS = "ipv6_only, loopback_only, no_reachable_address, ptrace_denied, v6only_listener"
BLIND = (
    "On node-a:9108, GPU processes run engines that discovery cannot scrape (ptrace_denied; one of "
    f"{REASONS}) and no engine is scraped: every serving alert of that node is blind. /api/v1/sources "
    "on the exporter says what to fix."
)
# node-a's exporter may not look into its engines (ptrace denied) until 40m, when it is fixed; node-b has a
# loopback-only engine beside one it scrapes; node-c trains (no engine) then restarts an engine (no
# listener for 10 minutes): none of these is blind.
HISTORY = {  # node -> reason -> the count of GPU processes with that outcome, minute by minute
    "node-a:9108": {"ptrace_denied": "2x39 _x20", "scraped": "_x40 2x19"},
    "node-b:9108": {"loopback_only": "1x59", "scraped": "1x59"},
    "node-c:9108": {"not_an_engine": "4x29 _x30", "no_listener": "_x30 2x10 _x19", "scraped": "_x40 2x19"},
}
ENGINES_UNREACHABLE = case(
    UNREACHABLE,
    [
        series(OUTCOMES, {**TARGET, "instance": node, "reason": reason}, values)
        for node, outcomes in HISTORY.items()
        for reason, values in outcomes.items()
    ],
    check(UNREACHABLE, "14m"),  # pending since 0m
    fires(UNREACHABLE, "16m", {**TARGET, "reason": "ptrace_denied"}, BLIND),
    check(UNREACHABLE, "42m"),  # fixed: the engines are scraped
)


SHARD = {"job": "servescope", "prometheus": "servescope/servescope-agent"}
REPLICA = "prometheus_replica"


def up(node: str, shard: int, values: str) -> dict[str, str]:
    """`up` of node's exporter as agent shard `shard` remote-wrote it (its external labels added)."""
    labels = {**SHARD, "instance": node, REPLICA: f"prom-agent-servescope-agent-shard-{shard}-0"}
    return series("up", labels, values)


# Shard 0 (nodes a and b) dies at 20m and comes back at 40m; shard 2 is removed at 20m by a scale-down,
# node-d moving to shard 1; node-e leaves the cluster at 20m while its shard (1) goes on with node-c.
AGENT_SHARD_SILENT = case(
    SILENT,
    [
        up("node-a", 0, "1x19 _x20 1x19"),
        up("node-b", 0, "1x19 _x20 1x19"),
        up("node-c", 1, "1x59"),
        up("node-e", 1, "1x19 _x40"),
        up("node-d", 2, "1x19 _x40"),
        up("node-d", 1, "_x20 1x39"),
        # The central Prometheus's own scrape of an exporter (no shard labels): not an agent's.
        series("up", {**TARGET, "instance": "node-f"}, "1x19 _x40"),
    ],
    check(SILENT, "23m"),  # silent since 20m (no sample in 3m from 22m): pending
    fires(
        SILENT,
        "25m",
        {"prometheus": SHARD["prometheus"], REPLICA: "prom-agent-servescope-agent-shard-0-0"},
        "Agent prom-agent-servescope-agent-shard-0-0 has sent nothing for 3m, and 2 node(s) it scraped are "
        "scraped by no shard now: their GPU and serving alerts cannot fire.",
    ),
    check(SILENT, "41m"),  # back
)

CASES = [SERIES_DROPPED, ENGINES_UNREACHABLE, AGENT_SHARD_SILENT]


@pytest.mark.e2e  # runs promtool, which `make test` installs and `make check` does not
def test_exporter_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
