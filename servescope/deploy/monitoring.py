"""What Prometheus, Grafana and Alertmanager load: the PrometheusRule, the dashboard ConfigMaps and the
Alertmanager snippet, all rendered from the bundles themselves (never copied from their built files)."""

from __future__ import annotations

from typing import Any

from servescope.bundle.alerts.alertmanager import alertmanager_config
from servescope.bundle.alerts.bundle import all_alerts, prometheus_rule, rule_file
from servescope.bundle.dashboards import build as dashboards
from servescope.core.config import AlertsConfig
from servescope.deploy.names import SECRET, VLLM_JOB
from servescope.deploy.options import DeployOptions
from servescope.deploy.runbooks import ALERTMANAGER_TOKEN_FILE
from servescope.runbooks.webhook import WEBHOOK_PATH


def alerts_config(options: DeployOptions) -> AlertsConfig:
    """The alert bundle's thresholds (--alerts-config, else the defaults), pointed at this deployment's
    namespace, release and services."""
    return options.thresholds().model_copy(update=_where(options))


def _where(options: DeployOptions) -> dict[str, Any]:
    """What the deployment decides of the bundle, whatever an --alerts-config file says."""
    return dict(
        namespace=options.rule_namespace or options.namespace,
        release_label=options.release,
        runbook_base_url=options.runbook_base_url(),
        dashboard_base_url=options.grafana_url,
        # Alertmanager posts inside the cluster, whatever URL people open the runbooks with.
        webhook_url=options.runbook_service_url() + WEBHOOK_PATH,
        webhook_credentials_file=ALERTMANAGER_TOKEN_FILE,
        # With --topology podmonitor the rules read the PodMonitor's vllm:* series, joined on namespace, pod.
        engine_topology=options.topology,
        engine_selector=f'job="{VLLM_JOB}"',
    )


def rule(options: DeployOptions) -> dict[str, Any]:
    """The PrometheusRule: for kube-prometheus-stack's Prometheus (its `release` label), or with only the
    labels the receiver's ruler selects (--rules-for prometheusrule)."""
    built: dict[str, Any] = prometheus_rule(alerts_config(options))
    if options.rules_for == "prometheusrule":
        labels = {k: v for k, v in built["metadata"]["labels"].items() if k != "release"}
        built["metadata"]["labels"] = {**labels, **options.rule_labels}
    return built


def receiver_rules(options: DeployOptions) -> dict[str, Any]:
    """The rules as a file for a ruler: Mimir's (`mimirtool rules load`: a namespace and its groups) or a
    Prometheus rule file (Thanos Ruler's --rule-file)."""
    rules = rule_file(alerts_config(options))
    return {"namespace": options.namespace, **rules} if options.rules_for == "mimir" else rules


def dashboard_json(name: str, options: DeployOptions) -> str:
    """A dashboard built from this deployment's config: its thresholds, and its link to the runbooks."""
    return dashboards.to_json(dashboards.render(name, alerts_config(options)))


def dashboard_configmaps(options: DeployOptions) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard, labelled grafana_dashboard="1" for the Grafana sidecar."""
    maps = []
    for name in dashboards.names():
        configmap: dict[str, Any] = dashboards.configmap(name, dashboard_json(name, options))
        configmap["metadata"]["namespace"] = options.namespace
        maps.append(configmap)
    return maps


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    rules = [] if options.rule_file_for_ruler else [rule(options)]
    return [*rules, *dashboard_configmaps(options)]


def alertmanager_receiver(options: DeployOptions) -> dict[str, Any]:
    """The route, receivers and inhibitions of the bundle, to merge into an Alertmanager configuration."""
    cfg = alerts_config(options)
    full: dict[str, Any] = alertmanager_config(cfg, all_alerts(cfg))
    return {key: full[key] for key in ("route", "receivers", "inhibit_rules")}


def alertmanager_receiver_header(options: DeployOptions) -> str:
    """Comments heading the snippet: how to merge it, and where the token must be."""
    if options.alertmanager_namespace == options.namespace:
        where = [
            f"  from its own namespace only; it shares {options.namespace} with the runbook service, so one",
            "  Secret serves both (deploy/README.md).",
        ]
    else:
        where = [
            f"  from its own namespace only: `{SECRET}` must exist in {options.alertmanager_namespace} too,",
            f"  with the same `token` as the runbook service's in {options.namespace} (deploy/README.md).",
        ]
    lines = [
        "servescope's Alertmanager route, receivers and inhibitions. Not a Kubernetes object: merge it into",
        "your Alertmanager configuration (with kube-prometheus-stack: alertmanager.config in its values).",
        "",
        "- route: your root route if you have none; else put its `routes` first under your root route's",
        "  routes. The servescope-runbooks route has `continue: true`: alerts go on to your routes after it.",
        "- receivers: servescope-runbooks posts every alert to the runbook service; pager, ticket and",
        "  heartbeat are placeholders for your own; kube-prometheus-stack already defines `null`: keep one.",
        "- Every route sets its own group_by (the pager: one notification thread per model; tickets: per",
        "  alert, node and model; docs/alerts.md): none inherits your root route's grouping.",
        "- inhibit_rules: append them to yours.",
        f"- The webhook's bearer token is read from {ALERTMANAGER_TOKEN_FILE}: list the",
        f"  Secret in alertmanager.alertmanagerSpec.secrets: [{SECRET}]. Alertmanager mounts Secrets",
        *where,
    ]
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)
