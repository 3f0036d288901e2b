"""kube-prometheus-stack's service names, one case per branch of the chart's fullname template."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from servescope.cli import app, register_subcommands
from servescope.deploy import kps
from servescope.deploy.options import DeployOptions
from tests.deploy.manifests import container, find

register_subcommands()


@pytest.mark.parametrize(
    ("release", "name_override", "fullname_override", "fullname"),
    [
        # The release is the chart's name: it contains it, so it is used alone.
        ("kube-prometheus-stack", "", "", "kube-prometheus-stack"),
        # A short release: <release>-<chart>, exactly 26 characters, nothing cut.
        ("prom", "", "", "prom-kube-prometheus-stack"),
        # Contains the chart's name and is longer than 26: cut to 26 ("monitoring-kube-prometheus").
        ("monitoring-kube-prometheus-stack", "", "", "monitoring-kube-prometheus"),
        # Does not contain it: <release>-<chart> cut to 26 = "monitoring-kube-prometheus" as well.
        ("monitoring", "", "", "monitoring-kube-prometheus"),
        # The cut ends on "-": one trailing "-" is removed ("llm-observability-prod-eu-" -> "...-eu").
        ("llm-observability-prod-eu-west", "", "", "llm-observability-prod-eu"),
        # nameOverride replaces the chart's name in both the test and the concatenation.
        ("prom", "kps", "", "prom-kps"),
        ("team-kps", "kps", "", "team-kps"),
        # fullnameOverride wins, cut to 26 and trimmed the same way.
        ("prom", "", "observability", "observability"),
        ("prom", "", "a-very-long-fullname-override-x", "a-very-long-fullname-overr"),
        ("prom", "", "abcdefghijklmnopqrstuvwxy-z", "abcdefghijklmnopqrstuvwxy"),
    ],
)
def test_fullname_follows_the_chart(
    release: str, name_override: str, fullname_override: str, fullname: str
) -> None:
    assert kps.fullname(release, name_override, fullname_override) == fullname
    assert len(fullname) <= 26 and not fullname.endswith("-")


def test_release_prom_renders_the_chart_s_real_service_names() -> None:
    result = CliRunner().invoke(app, ["deploy", "render", "--release", "prom"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    args = container(find(docs, "Deployment", "servescope-runbooks"))["args"]
    assert (
        args[args.index("--prometheus-url") + 1]
        == "http://prom-kube-prometheus-stack-prometheus.monitoring.svc:9090"
    )
    assert (
        args[args.index("--alertmanager-url") + 1]
        == "http://prom-kube-prometheus-stack-alertmanager.monitoring.svc:9093"
    )
    for monitor in (d for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")):
        assert monitor["metadata"]["labels"]["release"] == "prom"


def test_overrides_reach_the_urls_and_explicit_urls_win() -> None:
    options = DeployOptions(kps_fullname_override="obs", prometheus_namespace="metrics")
    assert options.prometheus_service_url() == "http://obs-prometheus.metrics.svc:9090"
    assert options.alertmanager_service_url() == "http://obs-alertmanager.monitoring.svc:9093"
    given = DeployOptions(prometheus_url="https://thanos-query.example:10902")
    assert given.prometheus_service_url() == "https://thanos-query.example:10902"
