"""End to end: the real exporter on a simulated node learns its engine pods from a kubelet and their
revisions from the fake API server (with the RBAC `deploy render` emits), and labels each engine's
serving series with its pod's `revision`, through a rollout."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.k8s.api_server import EXPORTER_TOKEN, NOBODY_TOKEN, NODE, ApiServer, api_server, pod
from tests.k8s.kubelet import FakeKubelet, container
from tests.k8s.kubelet import pod as kubelet_pod
from tests.k8s.test_exporter_pod_labels import series
from tests.support import Served, start_servescope, stop, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
GPU = "nvidia.com/gpu"
HASH = "pod-template-hash"
TTFT_COUNT = "servescope_serving_time_to_first_token_seconds_count"


@contextmanager
def exporter(server: ApiServer, socket: Path) -> Iterator[Served]:
    served = start_servescope(
        "--simulate", "--gpus", "2", "--engines", "2", "--no-dcgm", "--hostname", NODE,
        "--pod-resources-socket", str(socket), "--pod-resources-interval", "1",
        "--pod-labels", "--kube-api-url", server.url, "--kube-token-file", str(server.token_file),
    )  # fmt: skip
    try:
        yield served
    finally:
        stop(served)


@contextmanager
def node(
    tmp_path: Path, *objects: dict[str, object], token: str = EXPORTER_TOKEN
) -> Iterator[tuple[ApiServer, FakeKubelet, Served]]:
    """The API server holding `objects`, a kubelet (no pods yet) and the exporter of the node."""
    with (
        api_server(tmp_path, *objects, token=token) as server,
        FakeKubelet(tmp_path / "kubelet.sock") as kubelet,
        exporter(server, kubelet.socket) as served,
    ):
        yield server, kubelet, served


def source_up(base: str, source: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=5).text
    return next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "servescope_source_up" and sample.labels.get("source") == source
    )


def engines_by_pod(base: str) -> dict[str, str | None]:
    """pod -> the revision on its engine's TTFT series (None: no revision label)."""
    return {s["pod"]: s.get("revision") for s in series(base, TTFT_COUNT) if "pod" in s}


def holders(uuids: dict[str, str], pods: dict[str, str]) -> list[object]:
    """The kubelet's answer: GPU index -> the pod holding it."""
    return [
        kubelet_pod("serving", name, container("vllm", (GPU, [uuids[gpu]]))) for gpu, name in pods.items()
    ]


def settled(base: str, expected: dict[str, str | None]) -> dict[str, str | None]:
    return wait_for(
        f"the engines' revisions {expected}", lambda: engines_by_pod(base) == expected, 30, every=0.5
    )


def test_serving_series_carry_their_pod_s_revision_through_a_rollout(tmp_path: Path) -> None:
    stable = {HASH: "6d4cf56db9", "app": "deepseek"}
    objects = [
        pod("serving", "deepseek-6d4cf56db9-a", **stable),
        pod("serving", "deepseek-6d4cf56db9-b", **stable),
    ]
    with node(tmp_path, *objects) as (server, kubelet, served):
        uuids = {s["gpu"]: s["uuid"] for s in series(served.base, "servescope_gpu_info")}
        kubelet.pods = holders(uuids, {"0": "deepseek-6d4cf56db9-a", "1": "deepseek-6d4cf56db9-b"})
        settled(served.base, {"deepseek-6d4cf56db9-a": "6d4cf56db9", "deepseek-6d4cf56db9-b": "6d4cf56db9"})
        # The rollout: engine 1's pod is replaced by one of the new template; engine 0's is relabelled
        # in place (as Argo Rollouts' ephemeral metadata is).
        server.store.delete(("", "pods"), "serving", "deepseek-6d4cf56db9-b")
        server.store.add(pod("serving", "deepseek-84b5c7f9d-c", **{HASH: "84b5c7f9d", "app": "deepseek"}))
        kubelet.pods = holders(uuids, {"0": "deepseek-6d4cf56db9-a", "1": "deepseek-84b5c7f9d-c"})
        server.relabel("serving", "deepseek-6d4cf56db9-a", **{"app.kubernetes.io/version": "2.1"})
        settled(served.base, {"deepseek-6d4cf56db9-a": "6d4cf56db9", "deepseek-84b5c7f9d-c": "84b5c7f9d"})
        server.relabel("serving", "deepseek-6d4cf56db9-a", **{HASH: "84b5c7f9d"})
        settled(served.base, {"deepseek-6d4cf56db9-a": "84b5c7f9d", "deepseek-84b5c7f9d-c": "84b5c7f9d"})
        endpoints = series(served.base, "servescope_serving_endpoint_pod_info")
        up = source_up(served.base, "pod-labels")
    assert up == 1
    assert {s["pod"]: s.get("revision") for s in endpoints} == {
        "deepseek-6d4cf56db9-a": "84b5c7f9d",
        "deepseek-84b5c7f9d-c": "84b5c7f9d",
    }
    assert len(server.lists()) == 1  # one list, then the watch followed the rollout


def test_without_rbac_the_source_is_down_and_the_series_stay_without_revision(tmp_path: Path) -> None:
    objects = [pod("serving", "deepseek-a", **{HASH: "6d4cf56db9"})]
    with node(tmp_path, *objects, token=NOBODY_TOKEN) as (_, kubelet, served):
        uuids = {s["gpu"]: s["uuid"] for s in series(served.base, "servescope_gpu_info")}
        kubelet.pods = holders(uuids, {"0": "deepseek-a"})

        def refused() -> list[dict[str, str]]:
            found = series(served.base, "servescope_source_errors_total")
            return [s for s in found if s.get("source") == "pod-labels"]

        errors = wait_for("the pod-labels source's refusal", refused, 30, every=0.5)
        settled(served.base, {"deepseek-a": None})  # the engine's series are there, without revision
        up = source_up(served.base, "pod-labels")
    assert {e["reason"] for e in errors} == {"forbidden"}
    assert up == 0
