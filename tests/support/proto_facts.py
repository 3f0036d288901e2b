"""The wire facts of a .proto file, as protoc reads it: its package, every message's fields (number,
type, label, message type) and every service's methods. Two protos with the same facts for a message
put the same bytes on the wire for it.

The kubelet's pod-resources v1 facts are kept in tests/fixtures (the test compares the project's own
proto with them); to refresh them from a copy of the kubelet's api.proto:

    .venv/bin/python -m tests.support.proto_facts api.proto > tests/fixtures/kubelet-podresources-v1.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

Field = descriptor_pb2.FieldDescriptorProto


def descriptor(proto: Path) -> descriptor_pb2.FileDescriptorProto:
    """protoc's descriptor of `proto` (grpc_tools' bundled protoc)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "set.pb"
        protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}"]
        subprocess.run([*protoc, f"--descriptor_set_out={out}", str(proto)], check=True, capture_output=True)
        (only,) = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return only


def proto_facts(proto: Path) -> dict[str, Any]:
    """The package, messages and services of `proto`, in plain JSON types (names, not enum numbers)."""
    found = descriptor(proto)
    return {
        "package": found.package,
        "messages": {
            message.name: {
                f.name: [f.number, Field.Type.Name(f.type), Field.Label.Name(f.label), f.type_name]
                for f in message.field
            }
            for message in found.message_type
        },
        "services": {
            service.name: {m.name: [m.input_type, m.output_type] for m in service.method}
            for service in found.service
        },
    }


def render(facts: dict[str, Any]) -> str:
    """JSON with one line per field or method, for diffs a reader can follow."""
    text = json.dumps(facts, indent=2, sort_keys=True)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)


if __name__ == "__main__":
    print(render(proto_facts(Path(sys.argv[1]))))
