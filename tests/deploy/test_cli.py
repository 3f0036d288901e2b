"""`servescope deploy render`: stdout, --out/--check, tokens, and one clear line for each bad option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner, Result

from servescope.cli import app, register_subcommands
from servescope.deploy.options import DeployOptions, flag_of
from servescope.deploy.render import RECEIVER, documents, receiver_text

register_subcommands()  # the CLI imports subcommands when they run; these tests drive them directly


def render(*args: str) -> Result:
    return CliRunner().invoke(app, ["deploy", "render", *args], env={"COLUMNS": "200"})


def test_render_prints_every_document_as_parseable_yaml() -> None:
    result = render()
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert docs == documents(DeployOptions())


def test_namespace_moves_every_namespaced_object_and_the_urls_that_name_it() -> None:
    result = render("--namespace", "other")
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    assert namespace["metadata"]["name"] == "other"
    elsewhere = {
        (d["kind"], d["metadata"]["name"]) for d in docs if d["metadata"].get("namespace") != "other"
    }
    # Outside it: the Service over the GPU Operator's dcgm-exporter, in the Operator's namespace, and the
    # cluster-scoped roles of the runbook service (nodes, evictions) and of the exporter (its node's pods),
    # bound to their ServiceAccounts in `other`.
    assert elsewhere == {
        ("Namespace", "other"),
        ("Service", "servescope-dcgm-exporter"),
        ("ClusterRole", "servescope-runbooks"),
        ("ClusterRoleBinding", "servescope-runbooks"),
        ("ClusterRole", "servescope"),
        ("ClusterRoleBinding", "servescope"),
    }
    binding = next(
        d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("runbooks")
    )
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "servescope-runbooks", "namespace": "other"}
    ]
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["other"]
    assert "servescope-runbooks.other.svc:9110/runbooks/" in result.stdout
    assert "http://servescope.other.svc:9108" in result.stdout
    assert "servescope-runbooks.servescope.svc" not in result.stdout


# One flag and its value, refused (a bad value, or one that needs another option): the error names it.
BAD_VALUES = [
    ("--namespace", "Bad_Namespace"),
    ("--node-selector", "no-value"),
    ("--node-selector", "bad key=x"),
    ("--prometheus-pod-label", "app=not ok"),
    ("--prometheus-url", "ftp://prometheus:9090"),
    ("--runbook-url", "runbooks.example.com"),
    ("--scrape-interval", "15"),
    ("--image", "registry/servescope:1 --privileged"),
    ("--image-pull-policy", "Sometimes"),
    ("--incidents-pvc", "Claim_1"),
    ("--release", "x" * 64),
    ("--topology", "sidecar"),
    ("--dcgm-exporter-url", "http://x:9400/metrics"),
    ("--remote-write-url", "http://mimir/api/v1/push"),
    ("--vllm-port", "a-very-long-port-name"),
    ("--vllm-namespace", "Bad"),
    ("--vllm-drop-series", "vllm:("),
    ("--extra-scraper-pod-label", "a b=c"),
    ("--kps-fullname-override", "Not_A_Name"),
    ("--receiver-out", "x.yaml"),
]
# Other arguments refused, and the flag the error names.
BAD_ARGUMENTS = [
    (["--namespace", "monitoring"], "--create-namespace"),
    (["--namespace", "gpu-operator"], "--create-namespace"),
    (["--namespace", "kube-system"], "--create-namespace"),
    (["--dcgm", "exporter-url"], "--dcgm-exporter-url"),
    (["--agent", "--agent-shards", "0"], "--agent-shards"),
    (["--dcgm", "dcgmi", "--dcgm-host", "-h"], "--dcgm-host"),
    (["--check"], "--check"),
]


@pytest.mark.parametrize(
    ("args", "flag"), [*(([flag, value], flag) for flag, value in BAD_VALUES), *BAD_ARGUMENTS]
)
def test_bad_options_exit_2_with_a_line_naming_the_option(args: list[str], flag: str) -> None:
    result = render(*args)
    assert result.exit_code == 2, result.output
    assert flag in result.stderr
    assert result.stderr.startswith("servescope: error: ")
    assert "Traceback" not in result.output and result.stdout == ""


def test_a_value_click_cannot_convert_is_also_a_usage_error() -> None:
    result = render("--agent-shards", "many")
    assert result.exit_code == 2


def test_a_shared_namespace_is_used_without_being_owned() -> None:
    result = render("--namespace", "monitoring", "--no-create-namespace")
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert not [d for d in docs if d["kind"] == "Namespace"]


def test_repeated_key_value_options_build_one_mapping() -> None:
    result = render("--node-selector", "pool=gpu", "--node-selector", "zone=a", "--runtime-class", "")
    assert result.exit_code == 0, result.output
    (daemonset,) = [d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu", "zone": "a"}
    assert "runtimeClassName" not in spec


def test_out_writes_the_base_and_check_tells_current_from_stale(tmp_path: Path) -> None:
    out = tmp_path / "base"
    result = render("--out", str(out), "--namespace", "other")
    assert result.exit_code == 0, result.output
    assert (out / "kustomization.yaml").is_file() and (tmp_path / RECEIVER).is_file()
    assert render("--out", str(out), "--namespace", "other", "--check").exit_code == 0
    stale = render("--out", str(out), "--check")  # rendered for `other`, checked against the defaults
    assert stale.exit_code == 1
    assert "stale:" in stale.stderr and "daemonset-servescope.yaml" in stale.stderr
    assert render("--out", str(tmp_path / "missing"), "--check").exit_code == 1


def test_receiver_out_puts_the_snippet_where_asked(tmp_path: Path) -> None:
    receiver = tmp_path / "elsewhere" / "am.yaml"
    result = render("--out", str(tmp_path / "base"), "--receiver-out", str(receiver))
    assert result.exit_code == 0, result.output
    assert receiver.read_text() == receiver_text(DeployOptions())
    assert not (tmp_path / RECEIVER).exists()


def test_alertmanager_receiver_prints_the_snippet() -> None:
    result = render("--alertmanager-receiver", "--alertmanager-namespace", "alerting")
    assert result.exit_code == 0, result.output
    assert result.stdout == receiver_text(DeployOptions(alertmanager_namespace="alerting"))


def _token_files(tmp_path: Path) -> tuple[Path, Path]:
    webhook, change = tmp_path / "webhook", tmp_path / "change"
    webhook.write_text("a" * 64 + "\n")
    change.write_text("b" * 64 + "\n")
    return webhook, change


def test_tokens_put_the_secret_in_the_printed_documents(tmp_path: Path) -> None:
    webhook, change = _token_files(tmp_path)
    result = render("--webhook-token-file", str(webhook), "--change-token-file", str(change))
    assert result.exit_code == 0, result.output
    (secret,) = [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d["kind"] == "Secret" and d["metadata"]["namespace"] == "servescope"
    ]
    assert secret["stringData"] == {"token": "a" * 64, "change-token": "b" * 64}


def test_tokens_are_never_written_into_a_base(tmp_path: Path) -> None:
    webhook, change = _token_files(tmp_path)
    out = tmp_path / "base"
    result = render(
        "--out", str(out), "--webhook-token-file", str(webhook), "--change-token-file", str(change)
    )
    assert result.exit_code == 2
    assert "--webhook-token-file" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("missing", ["--webhook-token-file", "--change-token-file"])
def test_one_token_without_the_other_is_refused(tmp_path: Path, missing: str) -> None:
    webhook, change = _token_files(tmp_path)
    given = {"--webhook-token-file": webhook, "--change-token-file": change}
    given.pop(missing)
    ((flag, path),) = given.items()
    result = render(flag, str(path))
    assert result.exit_code == 2 and missing in result.stderr


def test_an_empty_or_unreadable_token_file_is_refused(tmp_path: Path) -> None:
    webhook, change = _token_files(tmp_path)
    webhook.write_text("\n")
    result = render("--webhook-token-file", str(webhook), "--change-token-file", str(change))
    assert result.exit_code == 2 and "--webhook-token-file" in result.stderr and "empty" in result.stderr
    result = render("--webhook-token-file", str(tmp_path / "nope"), "--change-token-file", str(change))
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_help_explains_every_option_and_every_option_is_a_flag() -> None:
    command: Any = typer.main.get_command(app)
    params = [
        p for p in command.commands["deploy"].commands["render"].params if p.param_type_name == "option"
    ]
    assert len(params) > len(DeployOptions.model_fields)
    for param in params:
        assert param.help and len(param.help) > 20, param.opts
    flags = {opt for p in params for opt in p.opts}
    for field in DeployOptions.model_fields:
        assert flag_of(field) in flags, field
    result = render("--help")
    assert result.exit_code == 0
    assert "--topology" in result.stdout and "kustomize" in result.stdout


MAPPINGS = [name for name, info in DeployOptions.model_fields.items() if info.annotation == dict[str, str]]


@pytest.mark.parametrize("field", MAPPINGS)
def test_every_key_value_option_parses_and_checks_its_pairs(field: str) -> None:
    # A validator of the same name in a subclass would silently replace its parent's: each field is
    # checked here, whichever class declares it.
    assert DeployOptions(**{field: ["example.com/role=gpu"]}).model_dump()[field] == {
        "example.com/role": "gpu"
    }
    result = render(flag_of(field), "bad key=x")
    assert result.exit_code == 2 and flag_of(field) in result.stderr, result.output


def test_the_mapping_options_are_the_ones_expected() -> None:
    assert sorted(MAPPINGS) == sorted(
        [
            "prometheus_pod_labels",
            "agent_pod_labels",
            "extra_scraper_pod_labels",
            "alertmanager_pod_labels",
            "node_selector",
            "vllm_pod_labels",
            "rule_labels",
        ]
    )
