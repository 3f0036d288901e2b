"""dcgm_sample against the bundled fake dcgmi, promql against a fake Prometheus: fixed argv, escaped
literals, failures as results."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import (
    ACTIONS,
    RunContext,
    promql_string,
)
from tests.runbook.fakes import (
    VECTOR,
    fake_http,
    go_unquote,
    run,
)

FAKE_DCGMI = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))


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
