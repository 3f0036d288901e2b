"""The committed kustomize base and Alertmanager snippet are what `deploy render` makes, file for file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from servescope.deploy.exporter import EXPORTER_MEMORY_LIMIT
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import HEADER, KUSTOMIZATION, RECEIVER, base_files, documents, stale, write_base
from tests.deploy.manifests import BASE, DEPLOY


def test_committed_base_is_current() -> None:
    assert stale(BASE, DEPLOY / RECEIVER, DeployOptions()) == [], (
        "deploy/base is stale: run `servescope deploy render --out deploy/base`"
    )


def test_stale_names_a_changed_a_missing_and_a_leftover_file(tmp_path: Path) -> None:
    out, receiver = tmp_path / "base", tmp_path / RECEIVER
    write_base(out, receiver, DeployOptions())
    assert stale(out, receiver, DeployOptions()) == []
    daemonset = out / "daemonset-servescope.yaml"
    limit = f"memory: {EXPORTER_MEMORY_LIMIT}"
    assert limit in daemonset.read_text()
    daemonset.write_text(daemonset.read_text().replace(limit, "memory: 1Gi"))
    (out / "service-servescope.yaml").unlink()
    (out / "configmap-servescope-dashboard-retired.yaml").write_text(HEADER + "kind: ConfigMap\n")
    receiver.write_text(receiver.read_text() + "# edited\n")
    assert stale(out, receiver, DeployOptions()) == sorted(
        str(p)
        for p in (
            daemonset,
            out / "service-servescope.yaml",
            out / "configmap-servescope-dashboard-retired.yaml",
            receiver,
        )
    )
    # Other options make the same files stale too: a base is current only for the options it was made with.
    write_base(out, receiver, DeployOptions())
    assert str(out / "daemonset-servescope.yaml") in stale(out, receiver, DeployOptions(namespace="other"))


def test_rewriting_removes_what_it_wrote_before_and_keeps_other_files(tmp_path: Path) -> None:
    out, receiver = tmp_path / "base", tmp_path / RECEIVER
    write_base(out, receiver, DeployOptions())
    (out / "configmap-servescope-dashboard-retired.yaml").write_text(HEADER + "kind: ConfigMap\n")
    (out / "mine.yaml").write_text("kind: Secret\n")
    write_base(out, receiver, DeployOptions())
    assert not (out / "configmap-servescope-dashboard-retired.yaml").exists()
    assert (out / "mine.yaml").exists()


def test_kustomization_lists_exactly_the_resource_files_of_the_base() -> None:
    kustomization = yaml.safe_load((BASE / KUSTOMIZATION).read_text())
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in BASE.iterdir()} - {KUSTOMIZATION}
    assert set(listed) == on_disk
    assert RECEIVER not in listed and not (BASE / RECEIVER).exists()


def test_every_base_file_is_one_document_of_the_render() -> None:
    rendered = documents(DeployOptions())
    from_files = [
        yaml.safe_load((BASE / name).read_text())
        for name in yaml.safe_load((BASE / KUSTOMIZATION).read_text())["resources"]
    ]
    assert from_files == rendered


def test_no_secret_and_no_token_is_ever_in_a_base() -> None:
    files = base_files(DeployOptions())
    assert not any(yaml.safe_load(text).get("kind") == "Secret" for text in files.values())
    committed = "".join(p.read_text() for p in BASE.iterdir())
    assert "stringData" not in committed and "kind: Secret" not in committed


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_builds_the_base() -> None:
    result = subprocess.run(
        ["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    built = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in built) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in documents(DeployOptions())
    )
