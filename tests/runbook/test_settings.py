"""The runbook settings: every variable the commands and the service read is a flag, a documented
environment variable (the names of earlier releases) and a row of the configuration reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from servescope.cli import app, register_subcommands
from servescope.core.settings_cli import cli_flag, env_names
from servescope.docs import settings_table
from servescope.runbooks.auth import ChangeTokens, TokenFileError, change_tokens
from servescope.runbooks.document import runbooks_dir
from servescope.runbooks.settings import (
    RUNBOOK_AREAS,
    SHIPPED_RUNBOOKS,
    FolderSettings,
    StepSettings,
    TokenSettings,
)
from tests.runbook.fakes import write_runbook

register_subcommands()

# The variables the runbook service read before it had a settings model: they must keep working.
EARLIER_NAMES = {
    "SERVESCOPE_RUNBOOKS",
    "SERVESCOPE_RUNBOOK_TOKEN",
    "SERVESCOPE_WEBHOOK_TOKEN",
    "SERVESCOPE_RUNBOOK_EXPORTER_URL",
    "SERVESCOPE_RUNBOOK_PROMETHEUS_URL",
    "SERVESCOPE_RUNBOOK_ALERTMANAGER_URL",
    # SERVESCOPE_RUNBOOK_KUBECTL and _DCGMI went with the binaries: changes act through the Kubernetes API,
    # DCGM samples come from the node's exporter.
    "SERVESCOPE_RUNBOOK_EXPORTER_PER_INSTANCE",
}
# The flags of earlier releases, per command.
EARLIER_FLAGS = {
    ("runbook", "list"): {"--runbooks"},
    ("runbook", "show"): {"--runbooks", "--label"},
    ("runbook", "run"): {
        "--step", "--label", "--execute", "--json", "--exporter-url", "--prometheus-url",
        "--alertmanager-url", "--timeout", "--exporter-per-instance", "--svg-dir",
        "--runbooks",
    },
    ("runbook-server",): {
        "--listen", "--runbooks", "--exporter-url", "--prometheus-url", "--alertmanager-url", "--token-file",
        "--audit-log", "--incidents-db", "--webhook-token-file", "--timeout",
        "--exporter-per-instance",
    },
}  # fmt: skip


def _command(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _fields() -> list[tuple[type[Any], str]]:
    return [(area, field) for area in RUNBOOK_AREAS for field in area.model_fields]


def test_the_variables_of_earlier_releases_keep_their_names() -> None:
    names = {env for area, field in _fields() for env in env_names(area, field)}
    assert names >= EARLIER_NAMES


@pytest.mark.parametrize("path", list(EARLIER_FLAGS))
def test_every_command_keeps_its_flags(path: tuple[str, ...]) -> None:
    flags = {opt for param in _command(path).params for opt in param.opts}
    assert flags >= EARLIER_FLAGS[path], EARLIER_FLAGS[path] - flags


def test_runbook_server_documents_every_setting_with_its_variable() -> None:
    params = {param.opts[0]: param for param in _command(("runbook-server",)).params}
    for area, field in _fields():
        flag = cli_flag(area, field).split("/")[0]
        assert flag in params, flag
        assert params[flag].help and len(params[flag].help) > 20, flag
        assert params[flag].envvar == env_names(area, field) and params[flag].show_envvar, flag
    text = CliRunner().invoke(app, ["runbook-server", "--help"], env={"COLUMNS": "250"}).stdout
    for area, field in _fields():
        assert env_names(area, field)[0] in text, field


def test_the_configuration_reference_lists_every_runbook_setting() -> None:
    table = settings_table()
    for area, field in _fields():
        assert f"| `{cli_flag(area, field)}` | `{env_names(area, field)[0]}` |" in table, field


def test_variables_set_the_step_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_EXPORTER_URL", "http://exporter.example:9108")
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_PROMETHEUS_URL", "http://prometheus.example:9090")
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_KUBE_API_URL", "https://10.0.0.1:6443")
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_EXPORTER_PER_INSTANCE", "true")
    monkeypatch.setenv("SERVESCOPE_RUNBOOKS", str(tmp_path))
    ctx = StepSettings().context()
    assert ctx.exporter_url == "http://exporter.example:9108" and ctx.exporter_per_instance
    assert (
        ctx.prometheus_url == "http://prometheus.example:9090" and ctx.kube_api_url == "https://10.0.0.1:6443"
    )
    assert not ctx.execute and StepSettings().context(execute=True).execute
    assert FolderSettings().folder() == tmp_path


def test_an_empty_runbooks_variable_means_the_shipped_runbooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVESCOPE_RUNBOOKS", "")
    assert FolderSettings().folder() == SHIPPED_RUNBOOKS
    assert runbooks_dir() == SHIPPED_RUNBOOKS


def test_a_bad_variable_is_refused_naming_its_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    write_runbook(tmp_path, "TestAlert")
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_TIMEOUT_SECONDS", "601")
    result = CliRunner().invoke(app, ["runbook", "run", "TestAlert", "--runbooks", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("servescope: error: invalid value for --timeout: ")


def test_the_change_token_file_wins_over_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVESCOPE_RUNBOOK_TOKEN", "  from-the-variable ")
    assert change_tokens(TokenSettings()) == ChangeTokens((("token", "from-the-variable"),))
    path = tmp_path / "token"
    path.write_text("from-the-file\n")
    path.chmod(0o600)
    assert change_tokens(TokenSettings(token_file=path)) == ChangeTokens((("token", "from-the-file"),))
    path.write_text("\n")
    with pytest.raises(TokenFileError, match=r"--token-file .*: the file is empty"):
        change_tokens(TokenSettings(token_file=path))
    monkeypatch.delenv("SERVESCOPE_RUNBOOK_TOKEN")
    assert change_tokens(TokenSettings()) is None


def test_a_token_file_names_its_tokens(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# who may act\nalice:0123456789abcdef0123\nci-bot:fedcba9876543210fedc\n")
    path.chmod(0o600)
    tokens = change_tokens(TokenSettings(token_file=path))
    assert tokens is not None
    assert tokens.identify("fedcba9876543210fedc") == "ci-bot" and tokens.identify("nope") is None
    path.write_text("alice:0123456789abcdef0123\nalice:fedcba9876543210fedc\n")
    with pytest.raises(TokenFileError, match="the name 'alice' is given twice"):
        change_tokens(TokenSettings(token_file=path))
    path.write_text("alice:short\nbob:fedcba9876543210fedc\n")
    with pytest.raises(TokenFileError, match="shorter than 16 characters"):
        change_tokens(TokenSettings(token_file=path))


BAD_OPTIONS = [
    (["--token-file", "{tmp}/missing"], "--token-file {tmp}/missing: cannot read"),
    (["--webhook-token-file", "{tmp}/empty"], "--webhook-token-file {tmp}/empty: the file is empty"),
    (["--listen", "nonsense"], "invalid value for --listen: "),
    (["--runbooks", "{tmp}/missing"], "invalid value for --runbooks: {tmp}/missing: not a folder"),
]


@pytest.mark.parametrize(("args", "message"), BAD_OPTIONS)
def test_runbook_server_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").write_text("")
    (tmp_path / "empty").chmod(0o600)
    given = [arg.format(tmp=tmp_path) for arg in args]
    result = CliRunner().invoke(app, ["runbook-server", "--listen", "127.0.0.1:0", *given])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("servescope: error: ") and message.format(tmp=tmp_path) in result.stderr
