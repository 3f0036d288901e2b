"""`servescope runbook list|show|run`: output, exit codes, dry runs, --execute, --json, hostile labels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from servescope.cli import app
from servescope.runbooks.document import ENV_RUNBOOKS, SHIPPED_RUNBOOKS
from tests.runbook.cli_peers import invoke, label_args
from tests.runbook.fakes import corpus, fake_http, step, write_runbook
from tests.runbook.kube_fakes import Cluster, cluster, deployment, node
from tests.support import Served

REAL_RUNBOOKS = SHIPPED_RUNBOOKS

DIAGNOSIS = (
    step("gpu-snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"', title="Look at the GPU")
    + step("curve", "read", "memory_curve", 'gpu: "{{ labels.uuid }}"\nwindow: 2m', title="Memory curve")
    + step("engines", "read", "serving_snapshot", 'model_name: "{{ labels.model_name }}"', title="Engines")
    + step("capacity", "read", "capacity_advice", title="Spare capacity")
)
MITIGATION = (
    step("cordon", "change", "cordon_node", 'node: "{{ labels.hostname }}"', title="Cordon the node")
    + step(
        "scale",
        "change",
        "scale_deployment",
        'namespace: serving\ndeployment: "{{ labels.deployment }}"\nadd: 2',
        title="Add a worker",
    )
    + step(
        "silence",
        "change",
        "create_silence",
        'alertname: TestAlert\nmatchers:\n  gpu: "{{ labels.gpu }}"\ncomment: "{{ labels.comment }}"',
        title="Silence it",
    )
    + step("lower", "change", "lower_max_num_seqs", 'model_name: "{{ labels.model_name }}"\nvalue: 64')
)


@dataclass
class Env:
    runbooks: Path
    kube: Cluster
    audit: Path
    exporter: str
    labels: dict[str, str]


@pytest.fixture(scope="module")
def exporter(simulated_exporter: Served) -> str:
    return simulated_exporter.base


@pytest.fixture
def env(tmp_path: Path, exporter: str) -> Iterator[Env]:
    folder = tmp_path / "runbooks"
    write_runbook(folder, "TestAlert", steps=DIAGNOSIS, mitigation=MITIGATION)
    gpus = httpx.get(f"{exporter}/api/v1/gpus").json()["gpus"]
    labels = {
        "gpu": "0",
        "uuid": gpus[0]["uuid"],
        "hostname": "gpu-node-07",
        "model_name": "deepseek-ai/DeepSeek-V3",
        "deployment": "vllm-deepseek",
        "comment": "mitigating",
    }
    with cluster(tmp_path, node("gpu-node-07"), deployment(1, "vllm-deepseek")) as kube:
        yield Env(folder, kube, tmp_path / "audit.jsonl", exporter, labels)


def run_args(env: Env, *args: str) -> list[str]:
    return [
        "run",
        "TestAlert",
        "--runbooks",
        str(env.runbooks),
        "--exporter-url",
        env.exporter,
        *kube_args(env.kube),
        "--audit-log",
        str(env.audit),
        *args,
    ]


def kube_args(kube: Cluster) -> list[str]:
    return ["--kube-api-url", kube.url, "--kube-token-file", str(kube.token_file)]


# --- list and show ---------------------------------------------------------------------------------
def test_list_shows_alert_severity_and_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runbook(tmp_path, "TestAlert", steps=DIAGNOSIS, mitigation=MITIGATION)
    write_runbook(tmp_path, "OtherAlert", severity="critical")
    result = invoke("list", "--runbooks", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "alert       severity  steps",
        "OtherAlert  critical  1 read, 0 change",
        "TestAlert   warning   4 read, 4 change",
    ]
    monkeypatch.setenv(ENV_RUNBOOKS, str(tmp_path))
    assert invoke("list").stdout == result.stdout
    write_runbook(tmp_path, "BrokenAlert", steps=step("x", "read", "no_such_action"))
    broken = invoke("list", "--runbooks", str(tmp_path))
    assert broken.exit_code == 1 and "TestAlert" in broken.stdout
    assert f"{tmp_path / 'BrokenAlert.md'}:18: step x: unknown action 'no_such_action'" in broken.stderr


def test_list_without_a_runbooks_folder_names_the_option(tmp_path: Path) -> None:
    result = invoke("list", "--runbooks", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "--runbooks" in result.stderr and "not a folder" in result.stderr


@pytest.mark.e2e
def test_show_prints_prose_and_steps_with_bound_params(env: Env) -> None:
    result = invoke("show", "TestAlert", "--runbooks", str(env.runbooks), "--label", "gpu=3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("TestAlert (warning): Something happened.\n")
    assert "## Meaning\nWhat the alert means." in out and "## Mitigation\nAct." in out
    assert "  [read] gpu-snapshot: Look at the GPU\n      gpu_snapshot(gpu='3')" in out
    assert "memory_curve(gpu={{ labels.uuid }}, window='2m')   # needs --label uuid=..." in out
    assert "  [change] cordon: Cordon the node" in out
    bad = invoke("show", "TestAlert", "--runbooks", str(env.runbooks), "--label", "gpu=$(reboot)")
    assert bad.exit_code == 2
    assert "! step gpu-snapshot: invalid parameter 'gpu' (from label 'gpu' = '$(reboot)')" in bad.stdout


# --- run: usage errors exit 2 before anything is read ----------------------------------------------
USAGE_ERRORS = [
    (["run", "NoSuchAlert"], "no runbook for alert 'NoSuchAlert'"),
    (["run", "TestAlert", "--step", "nope"], "TestAlert has no step 'nope' (steps: gpu-snapshot (read)"),
    (
        ["run", "TestAlert"],
        "step gpu-snapshot: parameter 'gpu' takes the alert label 'gpu', which was not given",
    ),
    (
        ["run", "TestAlert", "--label", "gpu=0", "--label", "uuid=GPU-1", "--label", "model_name=m;ls"],
        "step engines: invalid parameter 'model_name' (from label 'model_name' = 'm;ls'): "
        "expected a model name",
    ),
    (["run", "TestAlert", "--step", "cordon"], "parameter 'node' takes the alert label 'hostname'"),
    (
        ["run", "TestAlert", "--step", "scale", "--label", "deployment=../../etc/passwd"],
        "invalid parameter 'deployment' (from label 'deployment' = '../../etc/passwd'): "
        "expected a Kubernetes name",
    ),
    (["run", "TestAlert", "--execute"], "--execute acts on one change step: name it with --step ID"),
    (["run", "TestAlert", "--label", "gpu"], "--label 'gpu': expected name=value"),
    (["run", "TestAlert", "--label", "9x=1"], "--label '9x=1': expected name=value"),
    (["run", "TestAlert", "--label", "gpu=0", "--label", "gpu=1"], "--label gpu: given twice"),
    (
        ["run", "TestAlert", "--exporter-url", "file:///etc/passwd"],
        "invalid value for --exporter-url: expected an http:// or https:// URL, got 'file:///etc/passwd'",
    ),
    (
        ["run", "TestAlert", "--timeout", "0"],
        "invalid value for --timeout: Input should be greater than 0",
    ),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_run_usage_errors_exit_2_and_read_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    write_runbook(tmp_path, "TestAlert", steps=DIAGNOSIS, mitigation=MITIGATION)
    with fake_http(lambda r: (200, {})) as exporter, cluster(tmp_path) as kube:
        result = (
            invoke(*args, "--runbooks", str(tmp_path), *kube_args(kube), "--exporter-url", exporter.base)
            if "--exporter-url" not in args
            else invoke(*args, "--runbooks", str(tmp_path))
        )
        assert result.exit_code == 2, result.output
        assert message in result.stderr, result.stderr
        assert result.stderr.startswith("servescope: error: ")
        assert not exporter.requests and kube.api.requests == []


# --- run: read steps, change steps ------------------------------------------------------------------
@pytest.mark.e2e
def test_run_runs_every_read_step_and_lists_change_steps(env: Env) -> None:
    result = invoke(*run_args(env, *label_args(env.labels)))
    assert result.exit_code == 0, result.output
    out = result.stdout
    for header in (
        "== [read] gpu-snapshot: Look at the GPU (gpu_snapshot) OK",
        "== [read] curve: Memory curve (memory_curve) OK",
        "== [read] engines: Engines (serving_snapshot) OK",
        "== [read] capacity: Spare capacity (capacity_advice) OK",
    ):
        assert header in out
    assert "(SVG of " in out
    assert "Change steps (not run; run one with --step ID, dry unless --execute):" in out
    assert "  [change] cordon: Cordon the node\n      cordon_node(node='gpu-node-07')" in out
    assert "== [change]" not in out and env.kube.api.requests == []


@pytest.mark.e2e
def test_run_json_prints_the_step_results(env: Env, tmp_path: Path) -> None:
    result = invoke(*run_args(env, *label_args(env.labels), "--json", "--svg-dir", str(tmp_path / "svg")))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["alert"] == "TestAlert" and report["labels"] == env.labels
    assert [r["step"] for r in report["results"]] == ["gpu-snapshot", "curve", "engines", "capacity"]
    for item in report["results"]:
        assert item["ok"] and item["kind"] == "read" and item["title"] and item["output"] and item["data"]
        assert set(item) >= {"ok", "title", "output", "data", "svg", "command", "step", "action", "params"}
    curve = report["results"][1]
    assert curve["svg"].startswith("<svg") and curve["params"] == {"gpu": env.labels["uuid"], "window": "2m"}
    assert [s["step"] for s in report["not_run"]] == ["cordon", "scale", "silence", "lower"]
    assert report["not_run"][0]["params"] == {"node": "{{ labels.hostname }}"}
    svg_run = invoke(
        *run_args(env, *label_args(env.labels), "--step", "curve", "--svg-dir", str(tmp_path / "svg"))
    )
    assert svg_run.exit_code == 0 and (tmp_path / "svg" / "curve.svg").read_text().startswith("<svg")


@pytest.mark.e2e
def test_a_change_step_is_a_dry_run_unless_executed_and_executing_is_audited(env: Env) -> None:
    labels = label_args(env.labels)
    dry = invoke(*run_args(env, *labels, "--step", "scale"))
    assert dry.exit_code == 0, dry.output
    assert "== [change] scale: Add a worker (scale_deployment) OK (dry run)" in dry.stdout
    assert "PATCH /apis/apps/v1/namespaces/serving/deployments/vllm-deepseek/scale" in dry.stdout
    assert '"spec": {"replicas": 3}' in dry.stdout
    assert env.kube.api.changes() == [] and not env.audit.exists()  # a dry run is no audit record
    done = invoke(*run_args(env, *labels, "--step", "scale", "--execute"))
    assert done.exit_code == 0, done.output
    assert "(dry run)" not in done.stdout
    assert env.kube.changes() == [
        ("PATCH", "/apis/apps/v1/namespaces/serving/deployments/vllm-deepseek/scale")
    ]
    records = [json.loads(line) for line in env.audit.read_text().splitlines()]
    assert [(r["seq"], r["outcome"], r["step"], r["execute"]) for r in records] == [
        (1, "accepted", "scale", True),
        (2, "executed", "scale", True),
    ]
    assert (
        records[0]["caller"]["identity"].startswith("cli:")
        and records[0]["labels"]["hostname"] == "gpu-node-07"
    )
    as_json = json.loads(invoke(*run_args(env, *labels, "--step", "cordon", "--json")).stdout)
    assert as_json["results"][0]["data"]["api_calls"][0]["path"] == "/api/v1/nodes/gpu-node-07"
    assert as_json["results"][0]["dry_run"] is True and len(env.kube.api.changes()) == 1


@pytest.mark.e2e
def test_create_silence_through_the_cli(env: Env) -> None:
    with fake_http(lambda r: (200, {"silenceID": "abc"})) as alertmanager:
        args = run_args(
            env, *label_args(env.labels), "--step", "silence", "--alertmanager-url", alertmanager.base
        )
        dry = invoke(*args)
        assert dry.exit_code == 0 and '"comment": "mitigating"' in dry.stdout and not alertmanager.requests
        done = invoke(*args, "--execute")
        assert done.exit_code == 0, done.output
        assert "created silence abc" in done.stdout and len(alertmanager.requests) == 1


@pytest.mark.e2e
def test_a_failed_step_exits_1(env: Env) -> None:
    args = run_args(env, *label_args(env.labels), "--step", "gpu-snapshot")
    args[args.index("--exporter-url") + 1] = "http://127.0.0.1:1"
    result = invoke(*args)
    assert result.exit_code == 1
    assert "FAILED" in result.stdout and "cannot reach the exporter at http://127.0.0.1:1" in result.stdout


@pytest.mark.e2e
def test_hostile_labels_are_refused_before_anything_runs(env: Env, tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    with fake_http(lambda r: (200, {})) as exporter:
        for payload in corpus(sentinel):
            for label, step_id in (("gpu", None), ("hostname", "cordon"), ("deployment", "scale")):
                labels = {**env.labels, label: payload}
                args = run_args(env, *label_args(labels), "--execute" if step_id else "--json")
                args[args.index("--exporter-url") + 1] = exporter.base
                if step_id:
                    args += ["--step", step_id]
                result = CliRunner().invoke(app, ["runbook", *args])
                assert result.exit_code == 2, (label, payload[:40], result.output[:300])
                assert f"from label '{label}'" in result.stderr or "expected name=value" in result.stderr
        # Another test's Prometheus or exporter may still scrape a freed port this fake was given.
        from_the_cli = [r for r in exporter.requests if not r.scrape]
        assert not from_the_cli, from_the_cli
    assert env.kube.api.changes() == [] and not sentinel.exists()
