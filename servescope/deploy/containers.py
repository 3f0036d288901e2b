"""What every container of the servescope image shares: the image and its pull policy, a working folder
on the writable emptyDir, and the restricted security context."""

from __future__ import annotations

from typing import Any

from servescope.deploy.options import DeployOptions


def restricted_security() -> dict[str, Any]:
    """No privilege escalation, a read-only root filesystem, every capability dropped (the exporter adds
    back only what pod attribution needs)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def container(component: str, options: DeployOptions, args: list[str], **fields: Any) -> dict[str, Any]:
    """A container of the servescope image running `args`; `fields` add the rest of its spec. The root
    filesystem is read-only: anything written relative to the working folder lands in the /tmp emptyDir."""
    base = {"name": component, "image": options.image, "imagePullPolicy": options.image_pull_policy}
    return {**base, "args": args, "workingDir": "/tmp", **fields}
