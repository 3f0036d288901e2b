"""`deploy render --canary argo|flagger`: the objects validate against the controllers' own CRD schemas
(tests/deploy/data/SOURCES-rollout-controllers.md), their queries carry only the variables each
controller fills in, and every threshold comes from the one alerts config."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from servescope.cli import app, register_subcommands
from servescope.deploy.canary import CanaryOptions, argo, flagger_analysis, flagger_templates
from servescope.deploy.options import DeployOptions
from tests.deploy.test_validation import _closed

DATA = Path(__file__).parents[1] / "deploy" / "data"
OPTIONS = DeployOptions(topology="podmonitor")
CANARY = CanaryOptions(canary="argo", canary_namespace="llm", canary_model="deepseek")
# What each controller substitutes into a query, and nothing else may look like a template.
ARGO_VARIABLES = {"args.model-name", "args.canary-revision", "args.stable-revision"}
FLAGGER_VARIABLES = {"namespace", "target", "variables.model_name"}


@cache
def validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(_closed(json.loads((DATA / name).read_text())))


def errors(name: str, document: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(document)
    ]


def canary_analysis_schema() -> dict[str, Any]:
    """The Canary CRD's `spec.analysis`: what the snippet must be."""
    schema: dict[str, Any] = json.loads((DATA / "canary.json").read_text())
    return _closed(schema["properties"]["spec"]["properties"]["analysis"])


@pytest.mark.parametrize("topology", ["exporter", "podmonitor"])
def test_the_analysis_template_validates_against_argo_rollouts_crd(topology: str) -> None:
    (template,) = argo(DeployOptions(topology=topology), CANARY)
    assert template["kind"] == "AnalysisTemplate" and template["metadata"]["namespace"] == "llm"
    assert errors("analysistemplate.json", template) == []
    assert len(template["spec"]["metrics"]) == 5


@pytest.mark.parametrize("topology", ["exporter", "podmonitor"])
def test_the_metric_templates_and_the_canary_analysis_validate_against_flagger_crds(topology: str) -> None:
    options = DeployOptions(topology=topology)
    templates = flagger_templates(options, CANARY)
    assert len(templates) == 5
    for template in templates:
        assert errors("metrictemplate.json", template) == []
    analysis = flagger_analysis(options, CANARY)
    assert list(jsonschema.Draft7Validator(canary_analysis_schema()).iter_errors(analysis)) == []
    names = {template["metadata"]["name"] for template in templates}
    assert {metric["templateRef"]["name"] for metric in analysis["metrics"]} == names


def test_the_validation_refuses_a_misspelt_field_and_a_wrong_type() -> None:
    (template,) = argo(OPTIONS, CANARY)
    broken = copy.deepcopy(template)
    broken["spec"]["metrics"][0]["failurelimit"] = 1
    assert any("failurelimit" in e for e in errors("analysistemplate.json", broken))
    broken = copy.deepcopy(flagger_templates(OPTIONS, CANARY)[0])
    broken["spec"]["provider"]["type"] = "promql"
    assert errors("metrictemplate.json", broken)


def templated(query: str) -> set[str]:
    return set(re.findall(r"\{\{ ?([^{}]+?) ?\}\}", query))


def test_queries_use_only_what_each_controller_fills_in() -> None:
    (template,) = argo(OPTIONS, CANARY)
    for metric in template["spec"]["metrics"]:
        query = metric["provider"]["prometheus"]["query"]
        assert templated(query) == ARGO_VARIABLES, metric["name"]
        assert query.count("{{") == query.count("}}") == len(re.findall(r"\{\{args\.[a-z-]+\}\}", query))
    for template in flagger_templates(OPTIONS, CANARY):
        query = template["spec"]["query"]
        assert templated(query) <= FLAGGER_VARIABLES and "variables.model_name" in templated(query)
        assert query.count("{{") == query.count("}}") == len(re.findall(r"\{\{ [a-z_.]+ \}\}", query))


def test_thresholds_and_windows_come_from_the_alerts_config() -> None:
    (template,) = argo(OPTIONS, CANARY)
    by_name = {metric["name"]: metric for metric in template["spec"]["metrics"]}
    assert by_name["ttft-p99-ratio"]["failureCondition"] == "len(result) == 1 && result[0] > 1.5"
    assert by_name["ttft-slo-miss-increase"]["successCondition"] == "len(result) == 1 && result[0] <= 0.005"
    assert by_name["error-increase"]["failureCondition"].endswith("> 0.01")
    query = by_name["ttft-slo-miss-increase"]["provider"]["prometheus"]["query"]
    assert ">= 3 or" in query and ">= 500" in query and "increase10m" in query
    assert by_name["ttft-p99-ratio"]["initialDelay"] == "10m" and by_name["ttft-p99-ratio"]["count"] == 3
    # The PodMonitor topology's records: the provider asks kube-prometheus-stack's Prometheus.
    assert by_name["ttft-p99-ratio"]["provider"]["prometheus"]["address"].endswith(".monitoring.svc:9090")
    limits = {m["name"]: m["thresholdRange"]["max"] for m in flagger_analysis(OPTIONS, CANARY)["metrics"]}
    assert limits["itl-p99-ratio"] == 1.5 and limits["e2e-slo-miss-increase"] == 0.005
    assert flagger_analysis(OPTIONS, CANARY)["threshold"] == 2


def test_flagger_tells_the_canary_from_the_primary_by_pod_name() -> None:
    query = flagger_templates(OPTIONS, CANARY)[0]["spec"]["query"]
    assert 'pod=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"' in query
    assert 'pod=~"{{ target }}-primary-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"' in query
    assert 'vllm:num_requests_running{job="vllm",namespace="{{ namespace }}"' in query


def render(*args: str) -> Any:
    register_subcommands("deploy")
    return CliRunner().invoke(app, ["deploy", "render", *args])


def test_the_command_prints_the_objects_and_what_to_merge() -> None:
    result = render("--canary", "argo", "--topology", "podmonitor", "--canary-namespace", "llm")
    assert result.exit_code == 0, result.output
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in documents] == ["AnalysisTemplate"]
    assert "podTemplateHashValue: Latest" in result.stdout  # the Rollout's step, as comments
    result = render("--canary", "flagger", "--canary-model", "deepseek")
    assert result.exit_code == 0, result.output
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert {d["kind"] for d in documents} == {"MetricTemplate"}
    comments = "\n".join(line[2:] for line in result.stdout.splitlines() if line.startswith("#"))
    snippet = comments.split("add your webhooks):\n", 1)[1].split("Flagger has no inconclusive", 1)[0]
    analysis = yaml.safe_load(snippet)["analysis"]
    assert list(jsonschema.Draft7Validator(canary_analysis_schema()).iter_errors(analysis)) == []
    assert analysis["metrics"][0]["templateVariables"] == {"model_name": "deepseek"}


def test_the_command_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    result = render("--canary", "argo", "--out", str(tmp_path / "base"))
    assert result.exit_code == 2 and "--out" in result.stderr
    result = render("--canary", "spinnaker")
    assert result.exit_code == 2 and "--canary" in result.stderr
    assert not (tmp_path / "base").exists()
