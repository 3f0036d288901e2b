"""The names kube-prometheus-stack gives its services and pods, derived the way its Helm chart does.

The chart's `kube-prometheus-stack.fullname` template (templates/_helpers.tpl, chart 88.x) is: the
`fullnameOverride` if set; else the release name alone when it contains the chart name (or
`nameOverride`), else `<release>-<name>`; in every case cut to 26 characters and then stripped of one
trailing "-" (Sprig's `trunc 26 | trimSuffix "-"`). 26 leaves room for the longest suffix the chart adds.
The Prometheus and Alertmanager services are `<fullname>-prometheus` and `<fullname>-alertmanager`.
"""

from __future__ import annotations

CHART = "kube-prometheus-stack"
FULLNAME_LENGTH = 26
PROMETHEUS_PORT = 9090  # the chart's prometheus.service.port
ALERTMANAGER_PORT = 9093  # the chart's alertmanager.service.port

# Labels prometheus-operator puts on the pods it runs (pkg/prometheus/*, pkg/alertmanager/*).
POD_NAME_LABEL = "app.kubernetes.io/name"
PROMETHEUS_POD = "prometheus"
AGENT_POD = "prometheus-agent"
ALERTMANAGER_POD = "alertmanager"
CR_NAME_LABEL = "operator.prometheus.io/name"


def fullname(release: str, name_override: str = "", fullname_override: str = "") -> str:
    """The chart's fullname for a release (and the chart's nameOverride/fullnameOverride values)."""
    if fullname_override:
        return _trunc(fullname_override)
    name = name_override or CHART
    if name in release:
        return _trunc(release)
    return _trunc(f"{release}-{name}")


def _trunc(name: str) -> str:
    # Go's strings.TrimSuffix removes the suffix once, as removesuffix does.
    return name[:FULLNAME_LENGTH].removesuffix("-")


def prometheus_service(chart_fullname: str) -> str:
    return f"{chart_fullname}-prometheus"


def alertmanager_service(chart_fullname: str) -> str:
    return f"{chart_fullname}-alertmanager"
