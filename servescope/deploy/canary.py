"""`deploy render --canary argo|flagger`: the rollout controllers' analysis, from the alerts config.

Both compare the canary with the stable revision on the per-revision records of the bundle (the
PrometheusRule must be loaded) with the canary alert's own criteria and thresholds: P99 TTFT and ITL as a
multiple of the stable's, and the increase of the share of requests over each SLO bound and of failed
requests where a two-proportion z-test finds it significant; every query returns nothing until both
revisions served canary.min_requests in the window.

- Argo Rollouts: one AnalysisTemplate; the Rollout passes the model and both pod-template hashes
  (`podTemplateHashValue: Latest` and `Stable`). No data is `Inconclusive`: the rollout pauses for a
  person after inconclusiveLimit such measurements, never promotes on them.
- Flagger: one MetricTemplate per metric and the Canary's `analysis` to merge; the canary's pods are
  `<target>-<hash>-<id>`, the primary's `<target>-primary-<hash>-<id>`. Flagger has no inconclusive: a
  query without a value halts advancement and counts as a failed check.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from servescope.core.canary_exprs import BY, LATENCIES, SLO_SLIS, Pair, Side
from servescope.core.catalog import RUNNING
from servescope.core.config import AlertsConfig
from servescope.core.settings_cli import setting
from servescope.core.topology import sel
from servescope.deploy.checks import DnsLabel
from servescope.deploy.monitoring import alerts_config
from servescope.deploy.names import namespaced
from servescope.deploy.options import DeployOptions

Controller = Literal["", "argo", "flagger"]
ARGO_TEMPLATE = "servescope-canary"
# The pods of a Deployment are <deployment>-<pod-template-hash>-<suffix>: Flagger's canary Deployment is
# the target, its primary <target>-primary.
CANARY_PODS = "{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"
PRIMARY_PODS = "{{ target }}-primary-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"


class CanaryOptions(BaseModel):
    """What `--canary` renders, and for which namespace and model."""

    canary: Controller = setting(
        "",
        "--canary",
        "Print the rollout controller's canary analysis instead of the manifests: argo (an "
        "AnalysisTemplate) or flagger (MetricTemplates and the Canary's analysis to merge).",
    )
    canary_namespace: DnsLabel = setting(
        "serving", "--canary-namespace", "With --canary: the namespace of the Rollout or Canary."
    )
    canary_model: str = setting(
        "",
        "--canary-model",
        "With --canary flagger: the model (`model_name`) the Canary serves, set in its analysis. Argo "
        "Rollouts passes it as the AnalysisTemplate's `model-name` argument.",
    )


def _metric_names(cfg: AlertsConfig) -> list[tuple[str, str, float]]:
    """(metric name, what it measures, the threshold above which the canary is worse)."""
    canary = cfg.canary
    return [
        *((f"{lat}-p99-ratio", "latency", canary.latency_ratio) for lat in LATENCIES),
        *((f"{sli}-slo-miss-increase", "slo", canary.slo_miss_increase) for sli in SLO_SLIS),
        ("error-increase", "errors", canary.error_increase),
    ]


def queries(pair: Pair) -> dict[str, str]:
    """Metric name -> its query, for one way of telling the two revisions apart."""
    return {
        **{f"{lat}-p99-ratio": pair.latency_ratio(lat) for lat in LATENCIES},
        **{f"{sli}-slo-miss-increase": pair.slo_miss_increase(sli) for sli in SLO_SLIS},
        "error-increase": pair.error_increase(),
    }


def argo_pair(cfg: AlertsConfig) -> Pair:
    model = 'model_name="{{args.model-name}}"'
    return Pair(
        cfg,
        Side(f'{model},revision="{{{{args.canary-revision}}}}"'),
        Side(f'{model},revision="{{{{args.stable-revision}}}}"'),
    )


def flagger_pair(cfg: AlertsConfig) -> Pair:
    def pods(pattern: str) -> str:
        running = sel(cfg, RUNNING.name, 'namespace="{{ namespace }}"', f'pod=~"{pattern}"')
        return f" and on ({BY}) group by ({BY}) ({running})"

    model = 'model_name="{{ variables.model_name }}"'
    return Pair(cfg, Side(model, pods(CANARY_PODS)), Side(model, pods(PRIMARY_PODS)))


def argo(options: DeployOptions, canary: CanaryOptions) -> list[dict[str, Any]]:
    cfg = alerts_config(options)
    found = queries(argo_pair(cfg))
    metrics = [
        {
            "name": name,
            # The first measurement once the window holds the step's own traffic.
            "initialDelay": cfg.canary.window,
            "interval": cfg.canary.analysis_interval,
            "count": cfg.canary.analysis_count,
            "failureLimit": cfg.canary.failure_limit,
            "inconclusiveLimit": cfg.canary.inconclusive_limit,
            "successCondition": f"len(result) == 1 && result[0] <= {threshold:g}",
            "failureCondition": f"len(result) == 1 && result[0] > {threshold:g}",
            "provider": {"prometheus": {"address": options.prometheus_service_url(), "query": found[name]}},
        }
        for name, _, threshold in _metric_names(cfg)
    ]
    args = [{"name": name} for name in ("model-name", "canary-revision", "stable-revision")]
    spec = {"args": args, "metrics": metrics}
    return [
        namespaced(
            "argoproj.io/v1alpha1",
            "AnalysisTemplate",
            ARGO_TEMPLATE,
            canary.canary_namespace,
            "canary",
            spec=spec,
        )
    ]


def flagger_templates(options: DeployOptions, canary: CanaryOptions) -> list[dict[str, Any]]:
    cfg = alerts_config(options)
    provider = {"type": "prometheus", "address": options.prometheus_service_url()}
    return [
        namespaced(
            "flagger.app/v1beta1",
            "MetricTemplate",
            f"servescope-{name}",
            canary.canary_namespace,
            "canary",
            spec={"provider": provider, "query": query},
        )
        for name, query in queries(flagger_pair(cfg)).items()
    ]


def flagger_analysis(options: DeployOptions, canary: CanaryOptions) -> dict[str, Any]:
    """The Canary's `spec.analysis` to merge into yours (change the weights; add your webhooks)."""
    cfg = alerts_config(options)
    model = canary.canary_model or "MODEL_NAME"
    metrics = [
        {
            "name": name,
            "templateRef": {"name": f"servescope-{name}", "namespace": canary.canary_namespace},
            "templateVariables": {"model_name": model},
            "thresholdRange": {"max": threshold},
            "interval": cfg.canary.window,
        }
        for name, _, threshold in _metric_names(cfg)
    ]
    return {
        "interval": cfg.canary.analysis_interval,
        "threshold": cfg.canary.failure_limit + 1,
        # A starting point (Flagger needs a schedule): 10 % more of the traffic at each passed interval.
        "stepWeight": 10,
        "maxWeight": 50,
        "metrics": metrics,
    }


def rollout_step(model: str) -> dict[str, Any]:
    """The canary step of a Rollout that runs the analysis."""
    return {
        "analysis": {
            "templates": [{"templateName": ARGO_TEMPLATE}],
            "args": [
                {"name": "model-name", "value": model},
                {"name": "canary-revision", "valueFrom": {"podTemplateHashValue": "Latest"}},
                {"name": "stable-revision", "valueFrom": {"podTemplateHashValue": "Stable"}},
            ],
        }
    }


def _commented(lines: list[str]) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def render(options: DeployOptions, canary: CanaryOptions) -> str:
    """The `--canary` output: the controller's objects (for `kubectl apply -f -`), then, as comments,
    what to put into your Rollout or Canary."""
    from servescope.deploy.render import HEADER, dump  # the one YAML dumper of every manifest

    cfg = alerts_config(options)
    if canary.canary == "argo":
        documents = argo(options, canary)
        how = [
            "Argo Rollouts AnalysisTemplate: servescope's canary analysis. Run it from a canary step of",
            "your Rollout (the revisions are the pod-template hashes, the `revision` label of the",
            "engines' series):",
            "",
            *dump(
                {"steps": [{"setWeight": 10}, rollout_step(canary.canary_model or "MODEL_NAME")]}
            ).splitlines(),
            "",
            f"No data (fewer than {cfg.canary.min_requests} requests per revision in {cfg.canary.window})",
            "is Inconclusive: the rollout pauses for a person, it is never promoted on it.",
        ]
    else:
        documents = flagger_templates(options, canary)
        how = [
            "Flagger MetricTemplates: servescope's canary analysis. Merge this into your Canary's spec",
            "(the weights are a starting point; add your webhooks):",
            "",
            *dump({"analysis": flagger_analysis(options, canary)}).splitlines(),
            "",
            "Flagger has no inconclusive: a query without a value (fewer than",
            f"{cfg.canary.min_requests} requests per revision in {cfg.canary.window}) halts advancement and",
            "counts as a failed check. Give the canary enough traffic per interval (a load-tester webhook).",
        ]
    return HEADER + _commented(how) + "---\n".join(dump(document) for document in documents)
