"""Series about the exporter itself: build, simulation, and each source's health."""

from __future__ import annotations

from servescope.core.catalog.spec import counter as _counter
from servescope.core.catalog.spec import gauge as _gauge

BUILD_INFO = _gauge(
    "servescope_build_info",
    "servescope version and Python it runs on (value is always 1).",
    ("version", "python_version"),
    "core",
)
SIMULATED = _gauge(
    "servescope_simulated",
    "1 when this exporter serves a simulated fleet (--simulate), never on real data.",
    (),
    "core",
)
SOURCE_UP = _gauge(
    "servescope_source_up", "1 when the source's last collection succeeded, else 0.", ("source",), "core"
)
SOURCE_ABSENT = _gauge(
    "servescope_source_absent",
    "1 while what the source reads is not installed on this node (no dcgmi, no kubelet socket): a state "
    "of the node, not a failure, and no ServescopeSourceDown; exported only then (source_up is 0).",
    ("source",),
    "core",
)
SOURCE_LAST_SUCCESS = _gauge(
    "servescope_source_last_success_timestamp_seconds",
    "Unix time of the source's last successful collection (0 before the first).",
    ("source",),
    "core",
)
SOURCE_DURATION = _gauge(
    "servescope_source_collect_duration_seconds",
    "Wall time the source's last collection took.",
    ("source",),
    "core",
)
SOURCE_INTERVAL = _gauge(
    "servescope_source_interval_seconds",
    "Configured collection interval; a source is stale when its last success is older than 3 intervals.",
    ("source",),
    "core",
)
SOURCE_ERRORS = _counter(
    "servescope_source_errors_total",
    "Collection problems by reason; a partial problem (one GPU lost, one field failing) counts "
    "while the source stays up.",
    ("source", "reason"),
    "core",
)
RENDER_DURATION = _gauge(
    "servescope_exposition_render_duration_seconds",
    "Time the last re-render of this exposition took (done in the background, never per scrape).",
    (),
    "core",
)
