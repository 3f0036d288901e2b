"""--agent and where the alert rules go: scraped by servescope's own PrometheusAgent, the series live on a
receiver (a Prometheus with its remote-write receiver, Mimir, Thanos Receive), and so must the rules.

The in-cluster Prometheus of an agent that writes elsewhere has none of the series: rules loaded there
would only fire their absent() alerts forever, and the runbook service's PromQL steps would ask it in
vain. So an agent writing elsewhere must be told where its rules go (`--rules-for`) and where the
runbook service queries (`--prometheus-url`, the receiver's Prometheus API).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ValidationInfo, field_validator

from servescope.core.config import AlertsConfig, load_config
from servescope.core.settings_cli import repeated, setting
from servescope.deploy import checks
from servescope.deploy.checks import AnyLabels, OptionalDnsLabel
from servescope.deploy.placement import PlacementOptions

REMOTE_WRITE_PATH = "/api/v1/write"
RulesFor = Literal["in-cluster", "prometheusrule", "mimir", "thanos"]
# What `deploy render --out` writes beside the base when the rules are a file for a ruler.
RECEIVER_RULES = "receiver-rules.yaml"


class AgentOptions(PlacementOptions):
    """Who scrapes (the central Prometheus, or an agent), and where the rules are evaluated."""

    agent: bool = setting(
        False,
        "--agent/--no-agent",
        "Scrape servescope's targets with a PrometheusAgent in servescope's namespace that "
        "remote-writes to --remote-write-url (docs/scale-out.md); the central Prometheus then does not "
        "scrape them.",
    )
    remote_write_url: str = setting(
        "",
        "--remote-write-url",
        "With --agent: where it writes. Empty: kube-prometheus-stack's Prometheus, "
        "http://<fullname>-prometheus.<prometheus-namespace>.svc:9090/api/v1/write (enable its "
        "remote-write receiver). Elsewhere (Mimir, Thanos Receive) needs --rules-for and --prometheus-url.",
    )
    agent_shards: int = setting(
        1,
        "--agent-shards",
        "With --agent: shards the targets are spread over (prometheus-operator `shards`); each shard "
        "that stops sending is an alert on the receiver (ServescopeAgentShardSilent).",
        ge=1,
        le=64,
    )
    rules_for: RulesFor = setting(
        "in-cluster",
        "--rules-for",
        "Where the alert rules are evaluated. in-cluster: a PrometheusRule for kube-prometheus-stack's "
        "Prometheus (release label). prometheusrule: a PrometheusRule with --rule-label's labels only, "
        "for the ruler that selects them (a ThanosRuler, another Prometheus, Alloy's "
        "mimir.rules.kubernetes). "
        f"mimir, thanos: no PrometheusRule; --out writes {RECEIVER_RULES} beside the base, for `mimirtool "
        "rules load` (namespace and groups) or Thanos Ruler's --rule-file.",
    )
    rule_labels: AnyLabels = repeated(
        dict,
        "--rule-label",
        "With --rules-for prometheusrule: KEY=VALUE label of the PrometheusRule (repeatable), those the "
        "receiver's ruler selects by.",
    )
    rule_namespace: OptionalDnsLabel = setting(
        "",
        "--rule-namespace",
        "Namespace of the PrometheusRule (--rules-for in-cluster or prometheusrule). Empty: --namespace.",
    )
    alerts_config: str = setting(
        "",
        "--alerts-config",
        "YAML file of alert thresholds and windows (AlertsConfig fields, as `servescope alerts build "
        "--config`) for the rules rendered here. Empty: the defaults.",
    )

    # --- checks: each error names the value; the settings bridge adds the flag ----------------------
    @field_validator("remote_write_url")
    @classmethod
    def _remote_write(cls, value: str, info: ValidationInfo) -> str:
        if value and not info.data.get("agent"):
            raise ValueError(f"{value!r} is written to only by the agent: add --agent")
        return checks.optional_url(value)

    @field_validator("rules_for")
    @classmethod
    def _rules_go_where_the_series_are(cls, value: str, info: ValidationInfo) -> str:
        elsewhere = info.data.get("agent") and info.data.get("remote_write_url")
        if elsewhere and value == "in-cluster":
            raise ValueError(
                f"the agent writes to {info.data['remote_write_url']}: the in-cluster Prometheus has none "
                "of the series, and rules there would only fire their absent() alerts; choose "
                "prometheusrule, mimir or thanos for the receiver's ruler"
            )
        if elsewhere and not info.data.get("prometheus_url"):
            raise ValueError(
                "the runbook service's PromQL steps must query the receiver: give --prometheus-url, its "
                "Prometheus API (Mimir: https://<mimir>/prometheus, Thanos: the Querier)"
            )
        return value

    @field_validator("rule_labels")
    @classmethod
    def _labels_for_a_ruler(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.data.get("rules_for") == "prometheusrule" and not value:
            raise ValueError(
                "--rules-for prometheusrule needs the labels its ruler selects: --rule-label KEY=VALUE"
            )
        return value

    @field_validator("alerts_config")
    @classmethod
    def _thresholds(cls, value: str) -> str:
        if value:
            try:
                load_config(Path(value))
            except ValueError as exc:
                raise ValueError(str(exc).replace("\n", " ")) from None
        return value

    # --- what follows from them ---------------------------------------------------------------------
    def remote_write_target(self) -> str:
        return self.remote_write_url or self.prometheus_service_url().rstrip("/") + REMOTE_WRITE_PATH

    def thresholds(self) -> AlertsConfig:
        """The alert bundle's thresholds and windows: the --alerts-config file's, else the defaults."""
        return load_config(Path(self.alerts_config) if self.alerts_config else None)

    @property
    def rule_file_for_ruler(self) -> bool:
        """The rules are a file for a ruler (Mimir, Thanos) rather than a PrometheusRule."""
        return self.rules_for in ("mimir", "thanos")
