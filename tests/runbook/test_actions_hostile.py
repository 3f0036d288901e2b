"""Hostile label values: typed parameters refuse them, free text stays inert, no shell anywhere."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

import servescope.runbooks as runbooks_package
from servescope.runbooks.actions import (
    ACTIONS,
    GpuIndex,
    GpuRef,
    HttpUrl,
    K8sName,
    LabelValue,
    ModelName,
    RunContext,
    Window,
)
from servescope.runbooks.actions.changes import SilenceParams, silence_body
from tests.runbook.fakes import (
    VECTOR,
    corpus,
    fake_http,
    go_unquote,
    run,
)
from tests.runbook.kube_fakes import cluster, node

PACKAGE = Path(runbooks_package.__file__).resolve().parent


# --- hostile label values -------------------------------------------------------------------------
TYPED = {
    "GpuRef": GpuRef,
    "GpuIndex": GpuIndex,
    "K8sName": K8sName,
    "HttpUrl": HttpUrl,
    "ModelName": ModelName,
}


@pytest.mark.parametrize("type_name", [*TYPED, "Window"])
def test_typed_parameters_refuse_every_hostile_value(tmp_path: Path, type_name: str) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter({**TYPED, "Window": Window}[type_name])
    for payload in corpus(tmp_path / "SENTINEL"):
        with pytest.raises(ValidationError) as caught:
            adapter.validate_python(payload)
        message = str(caught.value)
        assert "expected" in message, message  # says what it wanted
        assert len(message) < 600  # a 10,000-character value is not echoed back whole
    goods: dict[str, list[Any]] = {
        "GpuRef": ["0", "12", "GPU-5b4e0a2c-1f3d-4c8e-9a7b-2d6f8e0c1a34"],
        "GpuIndex": ["0", "7", 3],
        "K8sName": ["gpu-node-07", "serving", "node.example.com"],
        "HttpUrl": ["http://10.0.0.5:8000/metrics", "https://vllm.serving.svc/v1?x=1"],
        "ModelName": ["deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-8B-Instruct"],
        "Window": ["90s", "30m", "1h", "2d"],
    }
    for good in goods[type_name]:
        adapter.validate_python(good)


@pytest.mark.e2e
def test_free_text_values_are_bounded_and_otherwise_inert(tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    adapter: TypeAdapter[str] = TypeAdapter(LabelValue)
    with pytest.raises(ValidationError, match="NUL"):
        adapter.validate_python("0\x00")
    with pytest.raises(ValidationError, match="over the limit of 1024"):
        adapter.validate_python("x" * 10_000)
    accepted = [p for p in corpus(sentinel) if "\x00" not in p and len(p) <= 1024]
    with fake_http(lambda r: (200, VECTOR)) as prometheus:
        ctx = RunContext(prometheus_url=prometheus.base)
        for payload in accepted:
            result = run("promql", ctx, query="up{hostname=$hostname}", hostname=payload)
            assert result.ok, result.output
            query = prometheus.requests[-1].query["query"][0]
            assert go_unquote(query[len("up{hostname=") : -1]) == payload
    for payload in accepted:
        params = SilenceParams.model_validate(
            {"alertname": payload, "matchers": {"hostname": payload}, "comment": payload or "-"}
        )
        body = json.loads(json.dumps(silence_body(params, datetime(2026, 1, 1, tzinfo=UTC))))
        assert body["matchers"][0]["value"] == payload and body["matchers"][1]["value"] == payload
        assert all(m["isRegex"] is False for m in body["matchers"])
    assert not sentinel.exists()


@pytest.mark.e2e
def test_hostile_values_never_reach_the_kubernetes_api(tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    with cluster(tmp_path, node("n1")) as kube:
        for payload in corpus(sentinel):
            for name, params in (
                ("cordon_node", {"node": payload}),
                ("drain_node", {"node": payload}),
                ("scale_deployment", {"namespace": payload, "deployment": "vllm", "add": 1}),
                ("scale_deployment", {"namespace": "serving", "deployment": payload, "add": 1}),
            ):
                with pytest.raises(ValidationError):
                    ACTIONS[name].params.model_validate(params)
        assert kube.api.requests == [] and not sentinel.exists()
        # a valid name is one path segment of the request, unexpanded
        run("cordon_node", kube.ctx(execute=True), node="n1")
        assert kube.changes() == [("PATCH", "/api/v1/nodes/n1")]


def test_no_shell_anywhere_in_the_runbook_package() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for item in ast.walk(tree):
            if isinstance(item, ast.Call):
                assert not any(k.arg == "shell" for k in item.keywords), f"{path}:{item.lineno}: shell="
                func = ast.unparse(item.func)
                assert func not in {"os.system", "os.popen", "eval", "exec", "os.execl", "os.spawnl"}, (
                    f"{path}:{item.lineno}: {func}"
                )
                if func in {"subprocess.run", "subprocess.Popen", "run_argv"}:
                    assert isinstance(item.args[0], ast.Name | ast.List), (
                        f"{path}:{item.lineno}: argv not a list"
                    )
