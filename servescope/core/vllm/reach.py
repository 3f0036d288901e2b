"""Why an engine's metrics were or were not scraped: the `reason` label of the exporter's discovery
series, written by the exporter and named by the alerts that watch it."""

from __future__ import annotations

SCRAPED = "scraped"
NOT_AN_ENGINE = "not_an_engine"
PTRACE_DENIED = "ptrace_denied"
PID_NOT_VISIBLE = "pid_not_visible"  # NVML's PID is not in this /proc (no hostPID, or it just exited)
NO_LISTENER = "no_listener"
LOOPBACK_ONLY = "loopback_only"
NO_REACHABLE_ADDRESS = "no_reachable_address"
IPV6_ONLY = "ipv6_only"
V6ONLY_LISTENER = "v6only_listener"
NOT_METRICS = "not_metrics"
# Where this exporter cannot reach an engine that runs: the exporter's place or rights, not the engine.
# A PID not visible here is not among them: nothing says it runs an engine (it may just have exited).
REACH_FAILURES = frozenset({PTRACE_DENIED, LOOPBACK_ONLY, NO_REACHABLE_ADDRESS, IPV6_ONLY, V6ONLY_LISTENER})
