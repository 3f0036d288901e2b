"""Every object validates strictly: core objects against the Kubernetes API schemas of the two newest
minor versions kubernetes-validate knows and of 1.30, the oldest supported, prometheus-operator's against
its CRD schemas (data/SOURCES.md)."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest

from tests.deploy.manifests import VARIANTS, Doc, find, rendered

DATA = Path(__file__).parent / "data"
CRD_GROUP = "monitoring.coreos.com/"
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
    ("monitoring.coreos.com/v1alpha1", "PrometheusAgent"): "prometheusagent.json",
}


def newest_minors(count: int = 2) -> list[str]:
    """The newest `count` Kubernetes minor versions (e.g. 1.36, 1.37) whose schemas the package ships."""
    minors = {".".join(v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()}
    return sorted(minors, key=lambda v: tuple(int(p) for p in v.split(".")))[-count:]


KUBERNETES = newest_minors()
# The oldest Kubernetes the manifests support: securityContext.appArmorProfile is GA from 1.30 on.
OLDEST_SUPPORTED = "1.30"


@pytest.fixture(autouse=True, scope="module")
def _schemas_parsed_once() -> Iterator[None]:
    """kubernetes-validate reads and parses its schema files (megabytes of JSON) at every call; the
    files do not change during a run, so each is parsed once."""
    with pytest.MonkeyPatch.context() as patch:
        read = kubernetes_validate.utils.schema_contents
        patch.setattr(kubernetes_validate.utils, "schema_contents", functools.cache(read))
        yield


def _core(docs: tuple[Doc, ...]) -> list[Doc]:
    return [d for d in docs if not str(d["apiVersion"]).startswith(CRD_GROUP)]


def _validate_core(doc: Doc, version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path)
        pytest.fail(f"Kubernetes {version}: {doc['kind']} {doc['metadata']['name']}: {where}: {exc.message}")


def _closed(schema: Any) -> Any:
    """The schema with unknown fields refused wherever the CRD does not keep them: what the API server
    does with `kubectl apply --validate=strict` (its default field validation) for a structural schema."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    schema = _closed(json.loads((DATA / CRD_SCHEMAS[(api_version, kind)]).read_text()))
    return jsonschema.Draft7Validator(schema)


def crd_errors(doc: Doc) -> list[str]:
    validator = crd_validator(doc["apiVersion"], doc["kind"])
    return [
        f"{doc['kind']} {doc['metadata']['name']}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(doc)
    ]


def test_the_two_newest_minor_versions_are_taken() -> None:
    assert len(KUBERNETES) == 2 and KUBERNETES[0] != KUBERNETES[1]
    assert kubernetes_validate.utils.latest_version().startswith(KUBERNETES[1])


@pytest.mark.parametrize("version", [OLDEST_SUPPORTED, *KUBERNETES])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_core_objects_validate_strictly(variant: str, version: str) -> None:
    core = _core(rendered(variant, with_tokens=True))
    kinds = {d["kind"] for d in core}
    assert {
        "ServiceAccount",
        "DaemonSet",
        "Service",
        "Deployment",
        "NetworkPolicy",
        "ConfigMap",
        "Secret",
    } <= kinds
    for doc in core:
        _validate_core(doc, version)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_prometheus_operator_objects_validate_against_the_crd_schemas(variant: str) -> None:
    custom = [d for d in rendered(variant) if str(d["apiVersion"]).startswith(CRD_GROUP)]
    rules = set() if VARIANTS[variant].rule_file_for_ruler else {"PrometheusRule"}  # a file for Mimir's ruler
    assert {d["kind"] for d in custom} >= {"ServiceMonitor", *rules}
    for doc in custom:
        assert (doc["apiVersion"], doc["kind"]) in CRD_SCHEMAS, "no schema for " + doc["kind"]
        assert crd_errors(doc) == []


def test_every_crd_kind_we_render_is_validated_by_some_variant() -> None:
    kinds = {
        (d["apiVersion"], d["kind"]) for v in VARIANTS for d in rendered(v) if CRD_GROUP in d["apiVersion"]
    }
    assert kinds == set(CRD_SCHEMAS)


def test_the_validation_catches_a_misspelt_field_and_a_wrong_type() -> None:
    daemonset = copy.deepcopy(find(rendered(), "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["tolerations"][0]["efect"] = "NoSchedule"
    service = copy.deepcopy(find(rendered(), "Service", "servescope"))
    service["spec"]["ports"][0]["port"] = "9108"
    for version in KUBERNETES:
        for broken in (daemonset, service):
            with pytest.raises(kubernetes_validate.ValidationError):
                kubernetes_validate.validate(broken, version, strict=True)


def test_the_crd_validation_catches_a_misspelt_field_a_wrong_type_and_a_bad_enum() -> None:
    monitor = copy.deepcopy(find(rendered(), "ServiceMonitor", "servescope"))
    monitor["spec"]["endpoints"][0]["relabellings"] = []
    assert any("relabellings" in e for e in crd_errors(monitor))
    agent = copy.deepcopy(find(rendered("agent"), "PrometheusAgent"))
    agent["spec"]["shards"] = "4"
    assert crd_errors(agent)
    pod_monitor = copy.deepcopy(find(rendered("podmonitor"), "PodMonitor"))
    pod_monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["action"] = "rename"
    assert crd_errors(pod_monitor)
    rule = copy.deepcopy(find(rendered(), "PrometheusRule"))
    del rule["spec"]["groups"][0]["name"]
    assert crd_errors(rule)
