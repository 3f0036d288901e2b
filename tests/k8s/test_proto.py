"""The project's pod-resources proto: the kubelet's names and field numbers; its committed stubs current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import FIXTURES
from tests.support.proto_facts import proto_facts

K8S = Path(__file__).parents[2] / "servescope" / "exporter" / "k8s"
# The kubelet's pod-resources v1 API (kubernetes/kubelet pkg/apis/podresources/v1/api.proto) as facts:
# message and field names, numbers and types, the methods (tests/fixtures/README.md).
KUBELET = json.loads((FIXTURES / "kubelet-podresources-v1.json").read_text())


def protoc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args], check=True, capture_output=True)


def test_committed_stubs_are_what_protoc_generates(tmp_path: Path) -> None:
    protoc(f"-I{K8S}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", str(K8S / "podresources.proto"))
    for name in ("podresources_pb2.py", "podresources_pb2.pyi"):
        assert (tmp_path / name).read_text() == (K8S / name).read_text(), f"{name} is stale: run `make proto`"


def test_every_message_field_and_method_matches_the_kubelets() -> None:
    ours = proto_facts(K8S / "podresources.proto")
    assert ours["package"] == KUBELET["package"] == "v1"
    reference = KUBELET["messages"]
    for name, fields in ours["messages"].items():
        assert name in reference, f"{name} is not a kubelet message"
        for field, facts in fields.items():
            assert reference[name].get(field) == facts, f"{name}.{field} differs from the kubelet's"
    (service,) = ours["services"].items()
    methods = KUBELET["services"]["PodResourcesLister"]
    assert service == (
        "PodResourcesLister",
        {"List": methods["List"], "GetAllocatableResources": methods["GetAllocatableResources"]},
    )
