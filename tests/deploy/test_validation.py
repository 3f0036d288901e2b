"""Every core Kubernetes object validates against the API schema, strictly (no unknown fields)."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from tests.deploy.manifests import VARIANTS, Doc, find, rendered

# The oldest Kubernetes release still maintained when this was written; the schemas only grow later.
KUBERNETES = "1.30"
CRD_GROUPS = ("monitoring.coreos.com/",)


def _core(docs: tuple[Doc, ...]) -> list[Doc]:
    return [d for d in docs if not str(d["apiVersion"]).startswith(CRD_GROUPS)]


def _validate(doc: Doc) -> None:
    try:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path)
        pytest.fail(f"{doc['kind']} {doc['metadata']['name']}: {where}: {exc.message}")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_core_objects_validate_strictly(variant: str) -> None:
    docs = rendered(variant, with_tokens=True)
    core = _core(docs)
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
        _validate(doc)


def test_the_validation_catches_a_misspelt_field_and_a_wrong_type() -> None:
    daemonset = copy.deepcopy(find(rendered(), "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["tolerations"][0]["efect"] = "NoSchedule"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES, strict=True)
    service = copy.deepcopy(find(rendered(), "Service", "servescope"))
    service["spec"]["ports"][0]["port"] = "9108"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES, strict=True)
