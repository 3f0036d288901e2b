"""Actions against real things: a simulated exporter, the bundled fake dcgmi, fake Prometheus, Alertmanager
and kubectl. Change actions act only when executed; hostile label values are refused or stay inert data."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
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
    StepResult,
    Window,
    promql_string,
)
from servescope.runbooks.actions.changes import SilenceParams, silence_body
from tests.runbook.fakes import Recorded, corpus, fake_http, fake_kubectl, start_simulated_exporter
from tests.support import Served, stop

FAKE_DCGMI = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))
PACKAGE = Path(runbooks_package.__file__).resolve().parent


def run(name: str, ctx: RunContext, **params: Any) -> StepResult:
    action = ACTIONS[name]
    return action.run(action.params.model_validate(params), ctx)


@pytest.fixture(scope="module")
def ctx(simulated_exporter: Served) -> RunContext:
    return RunContext(exporter_url=simulated_exporter.base)


@pytest.fixture(scope="module")
def gpu0(ctx: RunContext) -> dict[str, Any]:
    result = run("gpu_snapshot", ctx, gpu="0")
    assert result.ok, result.output
    return result.data


# --- read actions against `servescope serve --simulate --gpus 4 --engines 2` ------------------------
@pytest.mark.e2e
def test_gpu_snapshot_by_index_and_by_uuid(ctx: RunContext, gpu0: dict[str, Any]) -> None:
    assert gpu0["gpu"] == "0" and gpu0["uuid"].startswith("GPU-") and gpu0["up"] == 1
    assert 0 <= gpu0["utilization_ratio"] <= 1
    assert gpu0["memory_used_bytes"] > 0 and gpu0["memory_total_bytes"] > gpu0["memory_used_bytes"]
    assert gpu0["temperature_celsius"] > 0 and gpu0["power_limit_watts"] > 0
    assert set(gpu0["clocks_hertz"]) == {"sm", "memory"}
    assert gpu0["memory_summary"]["gpu"] == "0"
    by_uuid = run("gpu_snapshot", ctx, gpu="GPU-" + gpu0["uuid"][4:].upper())
    assert by_uuid.ok and by_uuid.data["gpu"] == "0"
    assert "GPU 0 (" in by_uuid.output and "UP" in by_uuid.output and "utilisation" in by_uuid.output
    assert by_uuid.action == "gpu_snapshot" and by_uuid.kind == "read"


@pytest.mark.e2e
def test_an_unknown_gpu_is_a_failed_result_naming_the_known_ones(ctx: RunContext) -> None:
    result = run("gpu_snapshot", ctx, gpu="7")
    assert not result.ok
    assert "GPU '7' is not in the exporter's metrics (known GPUs: 0 (GPU-" in result.output


@pytest.mark.e2e
def test_process_list_joins_processes_to_engines(ctx: RunContext) -> None:
    result = run("process_list", ctx, gpu="0")
    assert result.ok, result.output
    processes = result.data["processes"]
    assert processes and all(p["memory_used_bytes"] > 0 for p in processes)
    assert any(p["model_name"] == "deepseek-ai/DeepSeek-V3" and p["endpoint"] for p in processes)
    assert "pid" in result.output and "deepseek-ai/DeepSeek-V3" in result.output


@pytest.mark.e2e
def test_memory_curve_returns_the_summary_and_the_svg(ctx: RunContext) -> None:
    result = run("memory_curve", ctx, gpu="1", window="2m")
    assert result.ok, result.output
    assert result.svg is not None and result.svg.startswith("<svg") and result.svg.rstrip().endswith("</svg>")
    assert result.data["gpu"] == "1" and result.data["samples"] > 0 and result.data["window_seconds"] == 120
    assert "leak" in result.data and "memory over the last 2m" in result.output
    too_long = run("memory_curve", ctx, gpu="1", window="2d")  # beyond the exporter's 1 h retention
    assert not too_long.ok and "must be between 10s and the retention" in too_long.output


@pytest.mark.e2e
def test_nvlink_errors_per_gpu_by_default_and_the_dcgm_counters(ctx: RunContext) -> None:
    result = run("nvlink_errors", ctx, gpu="2")
    assert result.ok, result.output
    assert result.data["links_total"] == 18 and result.data["links_up"] == 18
    # The exposition sums over links by default: the links come from the exporter's NVLink API.
    links = result.data["links"]
    assert sorted(links, key=int) == [str(n) for n in range(18)]
    assert all(set(v) >= {"up", "crc_flit", "crc_data", "replay", "recovery"} for v in links.values())
    for kind, total in result.data["totals"].items():  # /metrics was read first: the API counts no less
        assert total is not None and sum(v[kind] for v in links.values()) >= total, kind
    assert "--nvlink-per-link" not in result.output
    assert set(result.data["dcgm"]) == {"409", "419", "429", "439"}
    assert "1009/1010 are PCIe bytes/s" in result.output


@pytest.mark.e2e
def test_nvlink_errors_per_link_where_the_exporter_exports_them() -> None:
    served = start_simulated_exporter("--nvlink-per-link")
    try:
        result = run("nvlink_errors", RunContext(exporter_url=served.base), gpu="2")
    finally:
        stop(served)
    assert result.ok, result.output
    assert len(result.data["links"]) == 18
    assert all(
        set(v) >= {"up", "crc_flit", "crc_data", "replay", "recovery"} for v in result.data["links"].values()
    )
    for kind, total in result.data["totals"].items():  # the per-GPU sums add up the per-link counters
        assert total == sum(v[kind] for v in result.data["links"].values()), kind
    assert "--nvlink-per-link" not in result.output


@pytest.mark.e2e
def test_serving_snapshot_of_every_engine_or_the_one_asked_for(ctx: RunContext) -> None:
    everything = run("serving_snapshot", ctx)
    assert everything.ok, everything.output
    engines = everything.data["engines"]
    assert len(engines) == 2
    for engine in engines:
        assert engine["kv_cache_usage_ratio"] is not None and engine["requests_running"] is not None
        assert engine["recommended_max_num_seqs"] >= 1 and engine["recommended_reason"]
        assert engine["gpus"]
    endpoint = engines[1]["endpoint"]
    one = run("serving_snapshot", ctx, endpoint=endpoint)
    assert [e["endpoint"] for e in one.data["engines"]] == [endpoint]
    by_model = run("serving_snapshot", ctx, model_name="deepseek-ai/DeepSeek-V3")
    assert len(by_model.data["engines"]) == 2
    unknown = run("serving_snapshot", ctx, model_name="no/such-model")
    assert not unknown.ok and "no serving engine with model_name 'no/such-model'" in unknown.output


@pytest.mark.e2e
def test_batch_size_advice_gives_the_value_its_inputs_and_the_rule(ctx: RunContext) -> None:
    result = run("batch_size_advice", ctx, model_name="deepseek-ai/DeepSeek-V3")
    assert result.ok, result.output
    for advice in result.data["engines"]:
        assert advice["reason"] in {"latency_over_slo", "gpu_underutilised", "within_slo", "no_traffic"}
        assert advice["recommended_max_num_seqs"] >= 1
        assert advice["rule"] and advice["gpu_utilization_ratio"] is not None
        assert set(advice["p99_since_start_seconds"]) == {"ttft", "e2e"}
    assert "recommended max_num_seqs" in result.output and "x0.8" in result.output


@pytest.mark.e2e
def test_capacity_advice_against_the_20_percent_buffer(ctx: RunContext) -> None:
    result = run("capacity_advice", ctx)
    assert result.ok, result.output
    data = result.data
    assert data["gpu_count"] == 4 and data["buffer_ratio"] == 0.2
    assert data["spare_ratio"] == pytest.approx(1 - data["mean_utilization_ratio"])
    assert data["below_buffer"] == (data["spare_ratio"] < 0.2)
    assert data["additional_gpus_needed"] >= 0


def test_an_unreachable_exporter_is_a_failed_result_not_a_crash() -> None:
    result = run("gpu_snapshot", RunContext(exporter_url="http://127.0.0.1:1", timeout_seconds=2), gpu="0")
    assert not result.ok and "cannot reach the exporter at http://127.0.0.1:1" in result.output


# --- dcgm_sample against the bundled fake dcgmi ---------------------------------------------------
@pytest.mark.e2e
def test_dcgm_sample_runs_dmon_with_a_fixed_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVESCOPE_FAKE_DCGMI_GPUS", "4")
    result = run("dcgm_sample", RunContext(dcgmi=FAKE_DCGMI), gpu="1", count=2)
    assert result.ok, result.output
    assert result.command == [
        FAKE_DCGMI,
        "dmon",
        "-i",
        "1",
        "-e",
        "409,419,429,439,1009,1010,1011,1012",
        "-c",
        "2",
    ]
    assert result.data["columns"] == ["NFELT", "NDELT", "NRELT", "NRCLT", "PCITX", "PCIRX", "NVLTX", "NVLRX"]
    assert len(result.data["rows"]) == 2 and all(len(row) == 8 for row in result.data["rows"])
    assert "409 NVLink CRC flit errors" in result.output and "1009/1010 are PCIe bytes" in result.output


@pytest.mark.e2e
def test_dcgm_sample_without_dcgmi_or_host_engine_is_a_clear_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = run("dcgm_sample", RunContext(dcgmi=str(tmp_path / "dcgmi")), gpu=0, fields=[409], count=1)
    assert not missing.ok and "not found: install DCGM" in missing.output
    monkeypatch.setenv("SERVESCOPE_FAKE_DCGMI_MODE", "unreachable")
    down = run("dcgm_sample", RunContext(dcgmi=FAKE_DCGMI), gpu=0, fields=[409], count=1)
    assert not down.ok and "host_engine_unreachable" in down.output


# --- promql against a fake Prometheus -------------------------------------------------------------
VECTOR = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [{"metric": {"__name__": "up", "gpu": "0"}, "value": [1, "1"]}],
    },
}


def go_unquote(literal: str) -> str:
    """Decode a PromQL (Go) double-quoted literal; fails if a quote inside is not escaped."""
    assert literal[0] == '"' and literal[-1] == '"'
    out, i = [], 1
    simple = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    while i < len(literal) - 1:
        ch = literal[i]
        assert ch != '"', f"unescaped quote at {i} in {literal!r}"
        assert ch not in "\n\r\x00", f"raw control character at {i}"
        if ch == "\\":
            code = literal[i + 1]
            if code == "u":
                out.append(chr(int(literal[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(simple[code])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def test_promql_string_escapes_quotes_backslashes_and_newlines() -> None:
    assert promql_string('a"b') == '"a\\"b"'
    assert promql_string("a\\b") == '"a\\\\b"'
    assert promql_string("a\nb\rc\td") == '"a\\nb\\rc\\td"'
    assert promql_string("\x01\x7f\u2028é日") == '"\\u0001\\u007f\\u2028é日"'
    for value in ['0"} or vector(1) #', "\\", '\\"', "\n\n", "x\\n", "'", "`"]:
        assert go_unquote(promql_string(value)) == value


@pytest.mark.e2e
def test_promql_inserts_values_only_as_escaped_literals() -> None:
    with fake_http(lambda r: (200, VECTOR)) as prometheus:
        ctx = RunContext(prometheus_url=prometheus.base)
        hostile = 'x"} or vector(1) or up{a="\\\n'
        result = run(
            "promql", ctx, query="servescope_gpu_up{gpu=$gpu, uuid=$uuid}", gpu=hostile, uuid="GPU-1"
        )
        assert result.ok, result.output
        sent = prometheus.requests[-1]
        assert sent.path == "/api/v1/query"
        query = sent.query["query"][0]
        assert query == 'servescope_gpu_up{gpu="x\\"} or vector(1) or up{a=\\"\\\\\\n", uuid="GPU-1"}'
        literal = query[len("servescope_gpu_up{gpu=") : query.index(', uuid="GPU-1"}')]
        assert go_unquote(literal) == hostile
        assert result.data["query"] == query and "up{gpu=" in result.output
        # the `labels` mapping form gives the same query
        mapped = run("promql", ctx, query="up{gpu=$gpu}", labels={"gpu": "0"})
        assert mapped.ok and prometheus.requests[-1].query["query"] == ['up{gpu="0"}']


@pytest.mark.e2e
def test_promql_failures_are_results_with_the_query() -> None:
    no_prometheus = run("promql", RunContext(), query="up{job=$job}", job="servescope")
    assert not no_prometheus.ok
    assert 'pass --prometheus-url (the query would be: up{job="servescope"})' in no_prometheus.output
    refused = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    with fake_http(lambda r: (400, refused)) as prometheus:
        result = run("promql", RunContext(prometheus_url=prometheus.base), query="up{")
        assert not result.ok and "bad_data: parse error" in result.output
    with pytest.raises(ValidationError, match="query uses \\$gpu but no parameter 'gpu' gives its value"):
        ACTIONS["promql"].params.model_validate({"query": "up{gpu=$gpu}"})
    with pytest.raises(ValidationError, match="both as a parameter and in labels"):
        ACTIONS["promql"].params.model_validate({"query": "up{gpu=$gpu}", "gpu": "0", "labels": {"gpu": "1"}})


# --- change actions: dry run unless executed -------------------------------------------------------
def recorded(marker: Path) -> list[list[str]]:
    return [json.loads(line) for line in marker.read_text().splitlines()] if marker.exists() else []


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "params", "argv"),
    [
        ("cordon_node", {"node": "gpu-node-07"}, ["cordon", "gpu-node-07"]),
    ],
)
def test_kubectl_actions_print_the_argv_and_run_it_only_when_executed(
    tmp_path: Path, name: str, params: dict[str, Any], argv: list[str]
) -> None:
    kubectl, marker = fake_kubectl(tmp_path)
    dry = run(name, RunContext(kubectl=str(kubectl)), **params)
    assert dry.ok and dry.dry_run and dry.command == [str(kubectl), *argv]
    assert f"would run\n  {kubectl} {' '.join(argv)}" in dry.output
    assert not marker.exists()
    done = run(name, RunContext(kubectl=str(kubectl), execute=True), **params)
    assert done.ok and not done.dry_run and done.command == [str(kubectl), *argv]
    assert recorded(marker) == [argv] and "done" in done.output


@pytest.mark.e2e
def test_a_missing_kubectl_is_a_failed_result(tmp_path: Path) -> None:
    result = run("cordon_node", RunContext(kubectl=str(tmp_path / "kubectl"), execute=True), node="n1")
    assert not result.ok and "not found: install kubectl or pass --kubectl PATH" in result.output


def test_lower_max_num_seqs_prints_the_patch_and_never_runs_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("lower_max_num_seqs started a process")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    for execute in (False, True):
        result = run(
            "lower_max_num_seqs",
            RunContext(execute=execute, exporter_url="http://127.0.0.1:1"),
            model_name="deepseek-ai/DeepSeek-V3",
            endpoint="http://10.0.0.5:8000/metrics",
            value=96,
        )
        assert result.ok and result.dry_run and result.command is None
        assert result.data["vllm_args"] == ["--max-num-seqs", "96"]
        assert "--max-num-seqs 96" in result.output and "Rolling-restart plan" in result.output
        assert ("Nothing was executed" in result.output) == execute
    with pytest.raises(ValidationError, match="give endpoint or model_name"):
        ACTIONS["lower_max_num_seqs"].params.model_validate({"value": 8})
    with pytest.raises(ValidationError):
        ACTIONS["lower_max_num_seqs"].params.model_validate({"model_name": "m", "value": 4097})


@pytest.mark.e2e
def test_create_silence_posts_to_alertmanager_only_when_executed() -> None:
    params = {
        "alertname": "ServescopeGpuSaturated",
        "matchers": {"instance": "10.0.0.5:9108", "gpu": "0"},
        "duration": "2h",
        "comment": "lowering the batch size, see the runbook",
    }

    def reply(request: Recorded) -> tuple[int, Any]:
        return 200, {"silenceID": "b3f9c1de-0000-4000-8000-000000000001"}

    with fake_http(reply) as alertmanager:
        dry = run("create_silence", RunContext(alertmanager_url=alertmanager.base), **params)
        assert dry.ok and dry.dry_run and not alertmanager.requests
        assert json.loads(dry.output.split("\n", 1)[1].rsplit("\n", 1)[0]) == dry.data["silence"]
        done = run("create_silence", RunContext(alertmanager_url=alertmanager.base, execute=True), **params)
        assert done.ok and done.data["silence_id"] == "b3f9c1de-0000-4000-8000-000000000001"
        (request,) = alertmanager.requests
        assert (request.method, request.path) == ("POST", "/api/v2/silences")
        body = json.loads(request.body)
        assert body["matchers"] == [
            {"name": "alertname", "value": "ServescopeGpuSaturated", "isRegex": False, "isEqual": True},
            {"name": "gpu", "value": "0", "isRegex": False, "isEqual": True},
            {"name": "instance", "value": "10.0.0.5:9108", "isRegex": False, "isEqual": True},
        ]
        assert body["comment"] == params["comment"] and body["createdBy"] == "servescope runbook"
        starts = body["startsAt"]
        assert starts.endswith("Z") and body["endsAt"] > starts
    no_alertmanager = run("create_silence", RunContext(execute=True), **params)
    assert not no_alertmanager.ok and "pass --alertmanager-url" in no_alertmanager.output
    with pytest.raises(ValidationError, match="7d at most"):
        SilenceParams.model_validate({**params, "duration": "8d"})
    with pytest.raises(ValidationError, match="not as a matcher"):
        SilenceParams.model_validate({**params, "matchers": {"alertname": "x"}})


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
def test_hostile_values_never_reach_kubectl(tmp_path: Path) -> None:
    kubectl, marker = fake_kubectl(tmp_path)
    sentinel = tmp_path / "SENTINEL"
    ctx = RunContext(kubectl=str(kubectl), execute=True)
    for payload in corpus(sentinel):
        for name, params in (
            ("cordon_node", {"node": payload}),
            ("drain_node", {"node": payload}),
            ("scale_deployment", {"namespace": payload, "deployment": "vllm", "add": 1}),
            ("scale_deployment", {"namespace": "serving", "deployment": payload, "add": 1}),
        ):
            with pytest.raises(ValidationError):
                ACTIONS[name].params.model_validate(params)
    assert not marker.exists() and not sentinel.exists()
    # a valid name goes to kubectl as one argv element, unexpanded
    run("cordon_node", ctx, node="n1")
    assert recorded(marker) == [["cordon", "n1"]]


def test_no_shell_anywhere_in_the_runbook_package() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                assert not any(k.arg == "shell" for k in node.keywords), f"{path}:{node.lineno}: shell="
                func = ast.unparse(node.func)
                assert func not in {"os.system", "os.popen", "eval", "exec", "os.execl", "os.spawnl"}, (
                    f"{path}:{node.lineno}: {func}"
                )
                if func in {"subprocess.run", "subprocess.Popen", "run_argv"}:
                    assert isinstance(node.args[0], ast.Name | ast.List), (
                        f"{path}:{node.lineno}: argv not a list"
                    )
