"""Runbook files: parsing, every error with its file and line, typed step parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import ACTIONS
from servescope.runbooks.binding import Template
from servescope.runbooks.document import (
    SHIPPED_RUNBOOKS,
    RunbookError,
    parse_runbook,
)
from tests.runbook.fakes import runbook_text, step

REAL_RUNBOOKS = SHIPPED_RUNBOOKS


def parse(tmp_path: Path, text: str, alert: str = "TestAlert") -> None:
    path = tmp_path / f"{alert}.md"
    path.write_text(text, encoding="utf-8")
    parse_runbook(path)


def error_of(tmp_path: Path, text: str, alert: str = "TestAlert") -> RunbookError:
    with pytest.raises(RunbookError) as caught:
        parse(tmp_path, text, alert)
    assert str(caught.value).startswith(f"{tmp_path / (alert + '.md')}:{caught.value.line}: ")
    return caught.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_runbook_parses_into_front_matter_sections_and_steps(tmp_path: Path) -> None:
    steps = step("gpu-snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"', title=r"The \"GPU\" now")
    steps += "Some prose between steps.\n\n```sh\nnvidia-smi -l 1\n```\n\n"
    steps += step("curve", "read", "memory_curve", 'gpu: "{{labels.uuid}}"\nwindow: 10m')
    mitigation = step("scale", "change", "scale_deployment", "namespace: serving\ndeployment: vllm\nadd: 4")
    text = runbook_text("ServescopeGpuSaturated", steps=steps, mitigation=mitigation)
    path = tmp_path / "ServescopeGpuSaturated.md"
    path.write_text(text)
    runbook = parse_runbook(path)
    assert (runbook.alert, runbook.severity, runbook.summary) == (
        "ServescopeGpuSaturated",
        "warning",
        "Something happened.",
    )
    assert runbook.title == "ServescopeGpuSaturated"
    assert list(runbook.sections) == ["Meaning", "Impact", "Diagnosis", "Mitigation"]
    assert "nvidia-smi -l 1" in runbook.sections["Diagnosis"]  # other fenced blocks stay prose
    assert "action:" not in runbook.sections["Diagnosis"]  # step blocks do not
    assert [s.id for s in runbook.steps] == ["gpu-snapshot", "curve", "scale"]
    first, curve, scale = runbook.steps
    assert first.title == 'The "GPU" now'
    assert first.kind == "read" and first.action == "gpu_snapshot" and first.section == "Diagnosis"
    assert first.params == {"gpu": Template("gpu")}
    assert first.line == line_of(text, "id=gpu-snapshot")
    assert first.param_lines["gpu"] == first.line + 3
    assert curve.params == {"gpu": Template("uuid"), "window": "10m"}
    assert curve.labels == ["uuid"]
    assert scale.section == "Mitigation" and scale.kind == "change"
    assert [s.id for s in runbook.read_steps] == ["gpu-snapshot", "curve"]
    assert [s.id for s in runbook.change_steps] == ["scale"]
    assert runbook.step("curve") is curve and runbook.step("nope") is None


def test_a_step_in_a_longer_fence_is_documentation_not_a_step(tmp_path: Path) -> None:
    example = "````markdown\n" + step("example", "change", "cordon_node", "node: n1") + "````\n\n"
    text = runbook_text(steps=example + step("snap", "read", "capacity_advice"))
    path = tmp_path / "TestAlert.md"
    path.write_text(text)
    assert [s.id for s in parse_runbook(path).steps] == ["snap"]


FRONT_ERRORS = [
    ("# TestAlert\n", 1, "expected YAML front matter"),
    ("---\nalert: TestAlert\n", 1, "not closed"),
    ("---\nalert: [\n---\n", 2, "not YAML"),
    ("---\n- a\n---\n", 2, "must be a mapping"),
    ("---\nalert: TestAlert\nseverity: warning\nsummary: s\nowner: me\n---\n", 2, "unknown key 'owner'"),
    ("---\nalert: TestAlert\nseverity: warning\n---\n", 2, "`summary` must be a non-empty string"),
    ("---\nalert: TestAlert\nseverity: page\nsummary: s\n---\n", 2, "severity 'page'"),
    ("---\nalert: Other\nseverity: info\nsummary: s\n---\n", 2, "must be the file's name (TestAlert.md)"),
]


@pytest.mark.parametrize(("text", "line", "message"), FRONT_ERRORS)
def test_front_matter_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    error = error_of(tmp_path, text)
    assert error.line == line and message in error.message


def test_the_title_and_the_four_sections_are_required(tmp_path: Path) -> None:
    text = runbook_text()
    error = error_of(tmp_path, text.replace("# TestAlert", "# Something else"))
    assert error.line == line_of(text, "# TestAlert") and "`# TestAlert`" in error.message
    error = error_of(tmp_path, text.replace("## Impact", "## Consequences"))
    assert "## Impact" in error.message
    error = error_of(tmp_path, text.replace("# TestAlert\n", ""))
    assert "missing the title" in error.message


def test_a_runbook_needs_a_read_step(tmp_path: Path) -> None:
    only_change = step("cordon", "change", "cordon_node", "node: gpu-node-1")
    error = error_of(tmp_path, runbook_text(steps=only_change))
    assert "at least one read step" in error.message


H = '```step id=a kind=read title="t"\naction: '
STEP_ERRORS = [
    (
        H + 'promql\nparams:\n  query: up{gpu=$gpu}\n  gpu: "x\\0"\n```\n',
        4,
        "NUL",
    ),
    # (step block, the line (offset from the fence) the error names, message)
    ("```step id=a kind=read\naction: capacity_advice\n```\n", 0, "missing attribute title="),
    ('```step id=Bad_Id kind=read title="t"\naction: capacity_advice\n```\n', 0, "lowercase-kebab-case"),
    ('```step id=a kind=write title="t"\naction: capacity_advice\n```\n', 0, "kind must be read or change"),
    (
        '```step id=a kind=read title="t" owner=me\naction: capacity_advice\n```\n',
        0,
        "unknown attribute 'owner'",
    ),
    ('```step id=a id=b kind=read title="t"\naction: capacity_advice\n```\n', 0, "given twice"),
    ('```step id=a kind=read title=""\naction: capacity_advice\n```\n', 0, "empty title"),
    ('```step id=a kind=read title="t\naction: capacity_advice\n```\n', 0, "cannot read"),
    (H + "capacity_advice\n", 0, "not closed"),
    (H + "[\n```\n", 1, "not YAML"),
    ('```step id=a kind=read title="t"\n- capacity_advice\n```\n', 0, "must be a mapping"),
    (H + "capacity_advice\nrun: x\n```\n", 0, "unknown key 'run'"),
    ('```step id=a kind=read title="t"\nparams: {}\n```\n', 1, "`action` must name an action"),
    (H + "capacity_advice\nparams: [1]\n```\n", 1, "must be a mapping"),
    (H + "shell\n```\n", 1, "unknown action 'shell'"),
    (
        H + "cordon_node\nparams:\n  node: n1\n```\n",
        0,
        "is a change action",
    ),
    ('```step id=a kind=change title="t"\naction: capacity_advice\n```\n', 0, "is a read action"),
    (
        H + "gpu_snapshot\nparams:\n  gpu: 0\n  cmd: ls\n```\n",
        4,
        "no parameter 'cmd'",
    ),
    (H + "gpu_snapshot\n```\n", 0, "needs parameter 'gpu'"),
    (
        H + 'gpu_snapshot\nparams:\n  gpu: "zero"\n```\n',
        3,
        "expected a GPU",
    ),
    (
        H + "memory_curve\nparams:\n  gpu: 0\n  window: 5 minutes\n```\n",
        4,
        "duration",
    ),
    (
        H + "dcgm_sample\nparams:\n  gpu: 0\n  count: 0\n```\n",
        4,
        "count",
    ),
    (
        H + 'gpu_snapshot\nparams:\n  gpu: "GPU-{{ labels.gpu }}"\n```\n',
        3,
        "the only templating allowed is a whole value",
    ),
    (
        H + 'gpu_snapshot\nparams:\n  gpu: "{{ labels.gpu | lower }}"\n```\n',
        3,
        "the only templating allowed",
    ),
    (
        H + 'gpu_snapshot\nparams:\n  gpu: "{{ annotations.gpu }}"\n```\n',
        3,
        "the only templating allowed",
    ),
    (
        H + 'gpu_snapshot\nparams:\n  gpu: "{% if x %}"\n```\n',
        3,
        "templating",
    ),
    (
        H + "gpu_snapshot\nparams:\n  gpu: {{ labels.gpu }}\n```\n",
        3,
        "quote templates",
    ),
    (
        H + 'promql\nparams:\n  query: "{{ labels.query }}"\n```\n',
        3,
        "must be written literally, not bound from a label",
    ),
    (
        H + 'promql\nparams:\n  query: "up{gpu=$gpu}"\n```\n',
        0,
        "no parameter 'gpu' gives its value",
    ),
    (
        '```step id=a kind=change title="t"\naction: lower_max_num_seqs\nparams:\n  value: 8\n```\n',
        0,
        "give endpoint or model_name",
    ),
    (
        H + "gpu_snapshot\nparams:\n  gpu: [0]\n```\n",
        3,
        "expected a GPU",
    ),
]


@pytest.mark.parametrize(("block", "offset", "message"), STEP_ERRORS)
def test_step_errors_name_file_and_line(tmp_path: Path, block: str, offset: int, message: str) -> None:
    steps = step("first", "read", "capacity_advice") + "Prose.\n\n" + block
    text = runbook_text(steps=steps)
    error = error_of(tmp_path, text)
    fence = line_of(text, block.splitlines()[0])
    assert message in error.message
    assert error.line == fence + offset, error


def test_step_ids_are_unique(tmp_path: Path) -> None:
    steps = step("snap", "read", "capacity_advice") + step("snap", "read", "capacity_advice")
    text = runbook_text(steps=steps)
    error = error_of(tmp_path, text)
    assert "'snap' is used twice" in error.message
    fences = [i for i, line in enumerate(text.splitlines(), 1) if line.startswith("```step id=snap")]
    assert error.line == fences[1]


def test_every_registered_action_has_typed_params_that_forbid_extra_fields() -> None:
    for name, action in ACTIONS.items():
        assert action.name == name and action.kind in ("read", "change")
        assert action.doc, name
        if name != "promql":
            assert action.params.model_config.get("extra") == "forbid", name
    # promql takes one extra parameter per $placeholder, each typed as a bounded label value
    with pytest.raises(ValidationError, match="over the limit of 1024"):
        ACTIONS["promql"].params.model_validate({"query": "up{gpu=$gpu}", "gpu": "x" * 1025})
    with pytest.raises(ValidationError, match="is not used by the query"):
        ACTIONS["promql"].params.model_validate({"query": "up", "gpu": "0"})
    reads = {n for n, a in ACTIONS.items() if a.kind == "read"}
    changes = {n for n, a in ACTIONS.items() if a.kind == "change"}
    assert reads == {
        "gpu_snapshot",
        "process_list",
        "memory_curve",
        "dcgm_sample",
        "nvlink_errors",
        "serving_snapshot",
        "promql",
        "batch_size_advice",
        "capacity_advice",
    }
    assert changes == {
        "scale_deployment",
        "cordon_node",
        "drain_node",
        "lower_max_num_seqs",
        "create_silence",
        "rollback",
    }
