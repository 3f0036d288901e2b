"""The project's pod-resources proto: the kubelet's names and field numbers; its committed stubs current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

from tests.helpers import SHARED

K8S = Path(__file__).parents[2] / "servescope" / "exporter" / "k8s"
REFERENCE = SHARED / "reference" / "kubelet" / "podresources-v1.proto"


def protoc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args], check=True, capture_output=True)


def descriptors(proto: Path, out: Path) -> descriptor_pb2.FileDescriptorProto:
    protoc(f"-I{proto.parent}", f"--descriptor_set_out={out}", str(proto))
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (only,) = files.file
    return only


def test_committed_stubs_are_what_protoc_generates(tmp_path: Path) -> None:
    protoc(f"-I{K8S}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", str(K8S / "podresources.proto"))
    for name in ("podresources_pb2.py", "podresources_pb2.pyi"):
        assert (tmp_path / name).read_text() == (K8S / name).read_text(), f"{name} is stale: run `make proto`"


def test_every_message_field_and_method_matches_the_kubelets(tmp_path: Path) -> None:
    ours = descriptors(K8S / "podresources.proto", tmp_path / "ours.pb")
    theirs = descriptors(REFERENCE, tmp_path / "theirs.pb")
    assert ours.package == theirs.package == "v1"
    reference = {
        m.name: {f.name: (f.number, f.type, f.label, f.type_name) for f in m.field}
        for m in theirs.message_type
    }
    for message in ours.message_type:
        assert message.name in reference, f"{message.name} is not a kubelet message"
        for f in message.field:
            assert reference[message.name].get(f.name) == (f.number, f.type, f.label, f.type_name), (
                f"{message.name}.{f.name} differs from the kubelet's"
            )
    (service,) = ours.service
    (kubelet,) = theirs.service
    methods = {m.name: (m.input_type, m.output_type) for m in kubelet.method}
    assert service.name == kubelet.name == "PodResourcesLister"
    assert {m.name: (m.input_type, m.output_type) for m in service.method} == {
        "List": methods["List"],
        "GetAllocatableResources": methods["GetAllocatableResources"],
    }
