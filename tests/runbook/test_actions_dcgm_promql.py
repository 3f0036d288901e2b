"""dcgm_sample against the node's own exporter (simulated), promql against a fake Prometheus: escaped
literals, failures as results."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from servescope.exporter.app import create_app
from servescope.exporter.publisher import Publisher
from servescope.exporter.runtime import Runtime
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
from tests.support import Served


# --- dcgm_sample from the node's own exporter (its DCGM source runs the simulator's dcgmi) ---------------
@pytest.mark.e2e
def test_dcgm_sample_reads_the_fields_from_the_exporter(simulated_exporter: Served) -> None:
    result = run("dcgm_sample", RunContext(exporter_url=simulated_exporter.base), gpu="1", count=2)
    assert result.ok, result.output
    assert result.data["fields"] == [409, 419, 429, 439, 1009, 1010, 1011, 1012]
    assert len(result.data["rows"]) == 2 and all(len(row) == 8 for row in result.data["rows"])
    assert all(value is not None for value in result.data["rows"][-1]), result.data
    assert result.data["uuid"].startswith("GPU-")
    assert "409 NVLink CRC flit errors" in result.output and "1009/1010 are PCIe bytes" in result.output


@pytest.mark.e2e
def test_dcgm_sample_of_an_unknown_gpu_or_field_is_a_clear_failure(simulated_exporter: Served) -> None:
    ctx = RunContext(exporter_url=simulated_exporter.base)
    missing = run("dcgm_sample", ctx, gpu=7, fields=[409], count=1)
    assert not missing.ok and "GPU '7': no DCGM series" in missing.output, missing.output
    unknown = run("dcgm_sample", ctx, gpu=0, fields=[65000], count=1)
    assert not unknown.ok and "exports none of the fields [65000]" in unknown.output, unknown.output


def test_the_exporter_serves_no_runbooks_and_one_read_only_dcgm_route() -> None:
    with TestClient(create_app(Runtime(Publisher()), manage_runtime=False)) as client:
        dcgm = client.get("/api/v1/gpus/0/dcgm")
        assert dcgm.status_code == 404 and "no DCGM series" in dcgm.json()["error"]
        assert client.post("/api/v1/gpus/0/dcgm").status_code == 405  # read-only
        for path in ("/runbooks", "/runbooks/ServescopeGpuLost"):
            assert client.get(path).status_code == 404
        assert client.post("/runbooks/ServescopeGpuLost/steps/drain/run", json={}).status_code == 404


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
