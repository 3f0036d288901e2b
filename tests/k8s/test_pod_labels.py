"""The exporter's list and watch of its node's pods (exporter/k8s/pod_labels.py), against the fake API
server with the RBAC `deploy render` emits: each pod's revision, as a rollout changes it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS
from servescope.exporter.k8s import pod_labels
from servescope.exporter.k8s.pod_labels import PodLabelsSource
from servescope.exporter.sources.base import SourceError
from servescope.exporter.stores.pod_revisions import PodRevisions
from tests.k8s.api_server import NOBODY_TOKEN, NODE, ApiServer, api_server, pod
from tests.support import wait_for

pytestmark = pytest.mark.e2e  # a server and the source's thread, on loopback
ROLLOUT, DEPLOYMENT, VERSION = DEFAULT_REVISION_POD_LABELS
PODS = (
    pod(
        "serving", "deepseek-6d4cf56db9-x2x7z", **{ROLLOUT: "6d4cf56db9", DEPLOYMENT: "ignored", "app": "ds"}
    ),
    pod("serving", "llama-7f9c8d-abcde", **{DEPLOYMENT: "7f9c8d", VERSION: "1.4"}),
    pod("chat", "qwen-0", **{VERSION: "2.0"}),
    pod("batch", "train-0", app="train"),  # no revision label: no revision
    pod("serving", "deepseek-6d4cf56db9-other", node="gpu-node-b", **{ROLLOUT: "6d4cf56db9"}),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def watching(
    server: ApiServer, seconds: int = 30, clock: Clock | None = None
) -> Iterator[tuple[PodLabelsSource, PodRevisions]]:
    """The source (its API server's watches end after `seconds`) and the revisions it writes."""
    store = PodRevisions()
    source = PodLabelsSource(
        NODE,
        DEFAULT_REVISION_POD_LABELS,
        store,
        server.connect,
        watch_seconds=(seconds, seconds),
        monotonic=clock or time.monotonic,
    )
    try:
        yield source, store
    finally:
        source.close()


def revisions(source: PodLabelsSource) -> dict[tuple[str, str], str]:
    return {key: value for key, value in source.status()["pods"].items() if value}


def query(request: dict[str, object]) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(str(request["query"])).items()}


def test_the_node_s_pods_are_listed_then_watched_with_the_rendered_rbac(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS) as server, watching(server) as (source, store):
        collection = source.collect()
        assert revisions(source) == {
            ("serving", "deepseek-6d4cf56db9-x2x7z"): "6d4cf56db9",  # Argo's hash first
            ("serving", "llama-7f9c8d-abcde"): "7f9c8d",  # then the Deployment's
            ("chat", "qwen-0"): "2.0",  # then the chart's version
        }
        assert store.revision("serving", "llama-7f9c8d-abcde") == "7f9c8d"
        assert store.revision("batch", "train-0") == ""  # on the node, no revision label
        assert store.revision("serving", "deepseek-6d4cf56db9-other") == ""  # another node's
        assert collection.problems == [] and collection.report is not None
        assert collection.report["pods"] == 4
        (listed,) = server.lists()
        assert query(listed)["fieldSelector"] == f"spec.nodeName={NODE}"
        assert query(listed)["resourceVersion"] == "0"  # from the API server's watch cache
        assert listed["user"] == "system:serviceaccount:servescope:servescope" and listed["status"] == 200
        watch = wait_for("the watch", server.watches, 10, every=0.1)[0]
        assert watch["resourceVersion"] == str(server.store.version())
        assert watch["allowWatchBookmarks"] == "true"
        assert watch["fieldSelector"] == f"spec.nodeName={NODE}"


def test_a_rollout_s_pods_and_relabels_change_the_revisions_as_they_happen(tmp_path: Path) -> None:
    old = "deepseek-6d4cf56db9-x2x7z"
    with api_server(tmp_path, *PODS) as server, watching(server) as (source, store):
        source.collect()
        wait_for("the watch", server.watches, 10, every=0.1)
        # Argo Rollouts brings up the canary's pod, then relabels the stable one's ephemeral metadata, then
        # the old pod goes; a pod of another node changes meanwhile.
        server.store.add(pod("serving", "deepseek-84b5c7f9d-q8k2m", **{ROLLOUT: "84b5c7f9d"}))
        server.relabel("serving", "llama-7f9c8d-abcde", **{DEPLOYMENT: "5c6d7e8f9", VERSION: "1.5"})
        server.store.add(
            pod("serving", "deepseek-84b5c7f9d-far", node="gpu-node-b", **{ROLLOUT: "84b5c7f9d"})
        )
        server.store.delete(("", "pods"), "serving", old)
        expected = {
            ("serving", "deepseek-84b5c7f9d-q8k2m"): "84b5c7f9d",
            ("serving", "llama-7f9c8d-abcde"): "5c6d7e8f9",
            ("chat", "qwen-0"): "2.0",
        }
        wait_for("the rollout's revisions", lambda: revisions(source) == expected, 10, every=0.05)
        assert store.revision("serving", old) == ""
        assert len(server.lists()) == 1  # followed by the watch, never listed again
        assert source.collect().problems == []


def test_what_the_exporter_is_sent_is_metadata_never_a_pod_s_spec(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS) as server, watching(server) as (source, _):
        source.collect()
        client = server.connect()
        from servescope.exporter.k8s.pod_watch import LIST_ACCEPT
        from servescope.exporter.k8s.pod_watch import PODS as PATH

        answer = client.get(
            PATH, params={"fieldSelector": f"spec.nodeName={NODE}"}, headers={"Accept": LIST_ACCEPT}
        )
        client.close()
        assert answer.json()["kind"] == "PartialObjectMetadataList"
        assert "hf_secret" not in answer.text and "containers" not in answer.text


def test_a_watch_the_server_ends_goes_on_from_its_last_resource_version(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS) as server, watching(server, seconds=1) as (source, _):
        source.collect()
        wait_for("two watches", lambda: len(server.watches()) >= 2, 10, every=0.1)
        # A change elsewhere moves the resourceVersion on; the bookmark that ends each watch carries it.
        server.store.add(pod("serving", "elsewhere", node="gpu-node-b"))
        moved = str(server.store.version())
        wait_for(
            "a watch from the bookmark's resourceVersion",
            lambda: any(watch["resourceVersion"] == moved for watch in server.watches()),
            10,
            every=0.1,
        )
        assert len(server.lists()) == 1


def test_a_too_old_resource_version_is_followed_by_a_new_consistent_list(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS) as server, watching(server, seconds=1) as (source, _):
        source.collect()
        wait_for("the watch", server.watches, 10, every=0.1)
        server.store.compact()  # what the watch resumes from is no longer kept: 410 Expired
        server.store.add(pod("serving", "deepseek-84b5c7f9d-q8k2m", **{ROLLOUT: "84b5c7f9d"}))
        wait_for("a second list", lambda: len(server.lists()) >= 2, 10, every=0.1)
        lists = server.lists()
        assert "resourceVersion" not in query(lists[1])  # the latest state, not the cache that was too old
        wait_for(
            "the pod added meanwhile",
            lambda: revisions(source).get(("serving", "deepseek-84b5c7f9d-q8k2m")) == "84b5c7f9d",
            10,
            every=0.1,
        )
        assert source.collect().problems == []  # a relist is the protocol, not a failure


def test_without_the_rbac_the_list_is_refused_counted_and_said(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS, token=NOBODY_TOKEN) as server, watching(server) as (source, store):
        with pytest.raises(SourceError) as refused:
            source.collect()
        assert refused.value.reason == "forbidden"
        assert 'cannot list resource "pods"' in refused.value.message
        assert store.revision("serving", "llama-7f9c8d-abcde") == ""


def test_deploy_render_without_pod_revisions_grants_the_exporter_nothing(tmp_path: Path) -> None:
    with api_server(tmp_path, *PODS, pod_revisions=False) as server, watching(server) as (source, _):
        with pytest.raises(SourceError) as refused:
            source.collect()
        assert refused.value.reason == "forbidden"


def test_an_api_server_gone_keeps_the_revisions_for_a_while_then_drops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pod_labels, "MAX_BACKOFF_SECONDS", 0.2)
    clock = Clock()
    with api_server(tmp_path, *PODS) as server, watching(server, seconds=1, clock=clock) as (source, store):
        source.collect()
        known = revisions(source)
        server.api.tokens.clear()  # every request is now refused (401), as a server that lost our account
        wait_for("a failed request", lambda: source.status()["failing"] is not None, 10, every=0.1)
        collection = source.collect()  # still up: the revisions last known are kept for a while
        assert {p.reason for p in collection.problems} == {"unauthorized"}
        assert store.revision("serving", "llama-7f9c8d-abcde") == "7f9c8d"
        assert revisions(source) == known
        clock.now += pod_labels.STALE_SECONDS + 1
        with pytest.raises(SourceError) as down:
            source.collect()
        assert down.value.reason == "unauthorized"
        assert store.revision("serving", "llama-7f9c8d-abcde") == ""
