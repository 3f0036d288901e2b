"""A fake kubectl that answers `get ... --output=json` from a cluster state file and records its argv."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# The program: `get <type>` prints state[<type>] (a missing type is kubectl's "doesn't have a resource
# type" error); `scale` checks --current-replicas like the API server's precondition, against
# state["replicas_now"] where a test changes the count behind the reader's back; anything else prints
# what kubectl would.
_PROGRAM = """
import json, sys
args = sys.argv[1:]
open(MARKER, "a").write(json.dumps(args) + "\\n")
state = json.load(open(STATE))
if args[0] == "get":
    if args[1] not in state:
        sys.stderr.write('error: the server doesn\\'t have a resource type "%s"\\n' % args[1])
        sys.exit(1)
    print(json.dumps(state[args[1]]))
elif args[0] == "scale":
    name = args[1].split("/")[1]
    now = state.get("replicas_now", state["deployment/" + name]["spec"]["replicas"])
    given = [a.split("=")[1] for a in args if a.startswith("--current-replicas=")]
    if given and int(given[0]) != now:
        sys.stderr.write("error: Expected replicas to be %s, was %d\\n" % (given[0], now))
        sys.exit(1)
    print("deployment.apps/%s scaled" % name)
else:
    print("node/%s %sed" % (args[1], args[0]))
"""


def fake_cluster_kubectl(folder: Path, state: dict[str, Any]) -> tuple[Path, Path, Path]:
    """A kubectl executable in `folder` over `state`: (program, argv marker, state file to edit)."""
    marker, state_file, program = folder / "kubectl-ran.json", folder / "cluster.json", folder / "kubectl"
    state_file.write_text(json.dumps(state))
    program.write_text(
        f"#!{sys.executable}\nMARKER = {str(marker)!r}\nSTATE = {str(state_file)!r}\n{_PROGRAM}"
    )
    program.chmod(0o755)
    return program, marker, state_file


def listing(*objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "serving"},
        "spec": {"replicas": replicas},
    }


def autoscaler(name: str, target: str, kind: str = "Deployment") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {"scaleTargetRef": {"kind": kind, "name": target}, "minReplicas": 2, "maxReplicas": 10},
    }


def pod(name: str, *, gpus: int = 1, emptydir: bool = False, daemonset: bool = False) -> dict[str, Any]:
    owner = {"kind": "DaemonSet" if daemonset else "ReplicaSet", "name": f"{name}-owner"}
    volumes: list[dict[str, Any]] = [{"name": "cache", "emptyDir": {}}] if emptydir else []
    return {
        "metadata": {
            "name": name,
            "namespace": "serving",
            "labels": {"app": "vllm"},
            "ownerReferences": [owner],
        },
        "spec": {
            "volumes": volumes,
            "containers": [{"name": "engine", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def budget(allowed: int, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "vllm-pdb", "namespace": "serving"},
        "spec": {"selector": {"matchLabels": {"app": "vllm"}} if selector is None else selector},
        "status": {"disruptionsAllowed": allowed},
    }
