"""Runbook templates and their binding to alert labels; where runbooks are found and how a folder loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.runbooks.binding import BindingError, Template, TemplateError, bind, parse_value
from servescope.runbooks.document import (
    ENV_RUNBOOKS,
    SHIPPED_RUNBOOKS,
    UnknownAlertError,
    load_runbook,
    load_runbooks,
    runbooks_dir,
)
from tests.runbook.fakes import write_runbook

REAL_RUNBOOKS = SHIPPED_RUNBOOKS


# --- templates and binding ---------------------------------------------------------------------
def test_templates_are_whole_values_inside_lists_and_mappings() -> None:
    assert parse_value("{{ labels.gpu }}", "p") == Template("gpu")
    assert parse_value("{{labels.gpu}}", "p") == Template("gpu")
    assert parse_value(["{{ labels.a }}", 3], "p") == [Template("a"), 3]
    assert parse_value({"gpu": "{{ labels.gpu }}", "job": "x"}, "p") == {"gpu": Template("gpu"), "job": "x"}
    assert parse_value("plain text with a } brace", "p") == "plain text with a } brace"
    for bad in (
        "{{ labels.gpu }}{{ labels.uuid }}",
        "x {{ labels.gpu }}",
        "{{ labels['gpu'] }}",
        "{{ 1 + 1 }}",
    ):
        with pytest.raises(TemplateError, match="the only templating allowed"):
            parse_value(bad, "p")
    with pytest.raises(TemplateError, match="keep keys literal"):
        parse_value({"{{ labels.k }}": "v"}, "p")
    with pytest.raises(TemplateError, match="expected a string, number or boolean"):
        parse_value([[1]], "p")


def test_binding_takes_label_values_verbatim_and_names_a_missing_label() -> None:
    params = {"gpu": Template("gpu"), "fields": [409, Template("field")], "m": {"k": Template("gpu")}}
    hostile = "$(touch /tmp/x)\n"
    assert bind(params, {"gpu": hostile, "field": "419"}, "step s") == {
        "gpu": hostile,
        "fields": [409, "419"],
        "m": {"k": hostile},
    }
    with pytest.raises(BindingError) as caught:
        bind(params, {"gpu": "0"}, "step s")
    assert str(caught.value) == (
        "step s: parameter 'fields' takes the alert label 'field', which was not given "
        "(--label field=...; labels given: gpu)"
    )


# --- where runbooks are found ----------------------------------------------------------------
def test_the_runbooks_folder_comes_from_the_option_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_RUNBOOKS, raising=False)
    assert runbooks_dir(tmp_path) == tmp_path
    monkeypatch.setenv(ENV_RUNBOOKS, str(tmp_path))
    assert runbooks_dir() == tmp_path
    with pytest.raises(UnknownAlertError, match=r"--runbooks .*: not a folder"):
        runbooks_dir(tmp_path / "missing")


def test_the_default_is_the_checkouts_runbooks_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_RUNBOOKS, raising=False)
    if REAL_RUNBOOKS.is_dir():
        assert runbooks_dir() == REAL_RUNBOOKS
    else:
        with pytest.raises(UnknownAlertError, match="pass --runbooks DIR or set SERVESCOPE_RUNBOOKS"):
            runbooks_dir()


def test_loading_a_folder_keeps_good_runbooks_and_reports_broken_ones(tmp_path: Path) -> None:
    write_runbook(tmp_path, "GoodAlert")
    write_runbook(tmp_path, "BrokenAlert", severity="urgent")
    (tmp_path / "README.md").write_text("# Runbooks\n")
    found, errors = load_runbooks(tmp_path)
    assert [r.alert for r in found] == ["GoodAlert"]
    assert len(errors) == 1 and str(errors[0]).startswith(f"{tmp_path / 'BrokenAlert.md'}:2: ")
    assert load_runbook(tmp_path, "GoodAlert").alert == "GoodAlert"
    for name in ("Missing", "../GoodAlert", "GoodAlert.md", "README"):
        with pytest.raises(UnknownAlertError, match="runbooks: BrokenAlert, GoodAlert"):
            load_runbook(tmp_path, name)


@pytest.mark.skipif(not REAL_RUNBOOKS.is_dir(), reason="no runbooks/ folder in this checkout yet")
def test_the_real_runbooks_parse_and_name_real_alerts() -> None:
    found, errors = load_runbooks(REAL_RUNBOOKS)
    assert not errors, "\n".join(str(e) for e in errors)
    rules = yaml.safe_load((ALERTS_BUILD / "rules.yaml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert found
    for runbook in found:
        assert runbook.alert in alerts, f"{runbook.path}: no alert {runbook.alert}"
