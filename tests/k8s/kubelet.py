"""A kubelet's pod-resources endpoint for tests: the simulator's (the real gRPC protocol on a unix socket),
answering what the test sets; and the DRA claims some tests give their pods."""

from __future__ import annotations

from typing import Any

from servescope.exporter.k8s import podresources_pb2 as pb
from servescope_sim.kubelet import SimulatedKubelet as FakeKubelet
from servescope_sim.kubelet import container, pod

__all__ = ["FakeKubelet", "container", "dra_claim", "pod"]


def dra_claim(claim: str, driver: str, device: str, cdi: list[str] | None = None) -> Any:
    resource = pb.ClaimResource(
        driver_name=driver,
        pool_name="node-a",
        device_name=device,
        cdi_devices=[pb.CDIDevice(name=n) for n in cdi or []],
    )
    return pb.DynamicResource(claim_name=claim, claim_namespace="serving", claim_resources=[resource])
