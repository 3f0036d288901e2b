"""The fake Kubernetes API server reads selectors and applies patches as the API server does.

Label selectors: the grammar of k8s.io/apimachinery's labels.Parse (equality, inequality, set-based,
existence), a selector that does not parse is a 400. JSON patches: RFC 6902, all or nothing, a failed
`test` a 422. Objects with a status subresource: the object's endpoint leaves the status alone, `/status`
changes nothing else, and `metadata.generation` counts spec changes only.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.kube import ApiStatusError, Store
from tests.support.kube.patches import json_patch
from tests.support.kube.selectors import label_selector

LABELS = {"app": "vllm", "pod-template-hash": "6d4cf56db9", "tier": "gpu"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("app=vllm", True),
        ("app==vllm,tier=gpu", True),
        ("app!=vllm", False),
        ("pod-template-hash in (7f8b9c0d1e,6d4cf56db9)", True),
        ("pod-template-hash in (7f8b9c0d1e)", False),
        ("pod-template-hash notin (7f8b9c0d1e)", True),
        ("missing notin (a)", True),
        ("tier,!canary", True),
        ("!tier", False),
        ("app=vllm, pod-template-hash in (6d4cf56db9, x), tier", True),
    ],
)
def test_label_selectors_read_as_the_api_server_reads_them(selector: str, matches: bool) -> None:
    assert label_selector(selector)(LABELS) is matches


@pytest.mark.parametrize("selector", ["app in ()", "app in (a", "a=b=c", "=x"])
def test_a_selector_that_does_not_parse_is_a_400(selector: str) -> None:
    with pytest.raises(ApiStatusError) as refused:
        label_selector(selector)
    assert refused.value.code == 400


def test_a_json_patch_is_all_or_nothing_and_a_failed_test_is_422() -> None:
    document = {"metadata": {"generation": 7}, "spec": {"template": {"a": 1}, "args": ["x"]}}
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/generation", "value": 7},
        {"op": "replace", "path": "/spec/template", "value": {"b": 2}},
        {"op": "add", "path": "/spec/args/-", "value": "y"},
        {"op": "remove", "path": "/spec/args/0"},
    ]
    assert json_patch(document, operations)["spec"] == {"template": {"b": 2}, "args": ["y"]}
    assert document["spec"] == {"template": {"a": 1}, "args": ["x"]}  # the original is untouched
    with pytest.raises(ApiStatusError, match="testing value /metadata/generation failed") as refused:
        json_patch(document, [{**operations[0], "value": 6}, operations[1]])
    assert refused.value.code == 422
    with pytest.raises(ApiStatusError, match="missing path"):
        json_patch(document, [{"op": "replace", "path": "/spec/nothing/here", "value": 1}])


def test_the_status_subresource_and_the_generation() -> None:
    store = Store()
    key = ("argoproj.io", "rollouts")
    store.add({"kind": "Rollout", "metadata": {"name": "r", "namespace": "s"}, "spec": {"replicas": 1}})
    store.patch_status(key, "s", "r", {"status": {"abort": True}, "spec": {"replicas": 9}})
    aborted = store.get(key, "s", "r")
    assert aborted["status"] == {"abort": True} and aborted["spec"] == {"replicas": 1}
    assert aborted["metadata"]["generation"] == 1  # a status write is no spec change
    store.patch(key, "s", "r", {"spec": {"replicas": 2}, "status": {"abort": False}})
    changed = store.get(key, "s", "r")
    assert changed["status"] == {"abort": True} and changed["metadata"]["generation"] == 2
