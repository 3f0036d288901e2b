"""The step summary a user reads, and the load options' declarations (no network)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from servescope.core.settings_cli import cli_flag
from servescope.kit.load.records import EngineSample, RequestRecord, StepResult
from servescope.kit.load.settings import LoadSettings, OutputSettings, TargetSettings, WorkloadSettings
from servescope.kit.load.summary import mode_label, path_seconds, render_text, summarise, ttft_agreement


def step(
    mode: str = "open", engine_le: float = 0.1, reason: str | None = None, fault: str | None = None
) -> StepResult:
    records = tuple(RequestRecord(i / 10, i / 10, i / 10 + 0.05, i / 10 + 0.2, 8, 4) for i in range(50))
    return StepResult(
        mode=mode,  # type: ignore[arg-type]
        offered=10.0 if mode == "open" else 4,
        duration_s=5.0,
        records=(*records, RequestRecord(5.0, 5.0, None, None, 8, 0, "timeout")),
        engine_samples=(EngineSample(1.0, 3, 0), EngineSample(2.0, 4, 1)),
        engine_ttft_buckets=((0.025, 0.0), (engine_le, 50.0), (float("inf"), 50.0)),
        invalid_reason=reason,
        fault=fault,  # type: ignore[arg-type]
    )


def test_summary_quotes_rates_percentiles_errors_and_the_engine() -> None:
    summary = summarise(step())
    assert (summary["requests"], summary["succeeded"], summary["errors"]) == (51, 50, {"timeout": 1})
    assert summary["ttft_s"]["p99"] == pytest.approx(0.05)
    assert summary["engine_ttft_p99_bucket_s"] == [0.025, 0.1] and summary["engine_ttft_agrees"] is True
    assert summary["engine_waiting_max"] == 1
    text = render_text(summary)
    assert text.startswith("open loop, 10 req/s offered: VALID") and "agrees with" in text


def test_a_client_outside_the_engine_bucket_disagrees() -> None:
    agreement = ttft_agreement(step(engine_le=0.04))
    assert agreement is not None and not agreement.agrees


def test_steps_that_are_not_results_name_the_side_at_fault_first() -> None:
    assert render_text(summarise(step(reason="backlog: x", fault="overload"))).startswith(
        "open loop, 10 req/s offered: OVERLOADED (above capacity: the engine's backlog grew): backlog: x"
    )
    assert render_text(summarise(step(reason="lag", fault="client"))).startswith(
        "open loop, 10 req/s offered: CLIENT_BOUND (not a result: the client could not drive it): lag"
    )
    failed = summarise(step(reason="60 of 100 failed", fault="engine"))
    assert failed["status"] == "engine_failed" and render_text(failed).startswith(
        "open loop, 10 req/s offered: ENGINE_FAILED (most requests failed): 60 of 100 failed"
    )
    assert mode_label(step("closed")).startswith("CLOSED LOOP, 4 concurrent clients")


def test_every_load_option_has_a_flag_and_a_description() -> None:
    for model in (TargetSettings, LoadSettings, OutputSettings, WorkloadSettings):
        for field, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{field}"
            assert cli_flag(model, field).startswith("--")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="http"):
        TargetSettings(url="ftp://engine")
    assert TargetSettings(url="http://engine:8000/v1/").url == "http://engine:8000"
    with pytest.raises(ValidationError):
        LoadSettings(rate=0)


def test_the_path_the_engine_clock_omits_is_measured_from_the_means_and_allowed_for() -> None:
    # Every client TTFT is 50 ms; the engine says 10 ms on average, all in its (0.025, 0.04] bucket: the
    # 40 ms between them is the HTTP and API-server path, and the client's P99 agrees once allowed it.
    discounted = replace(step(engine_le=0.04), engine_ttft_mean_s=0.01)
    agreement = ttft_agreement(discounted)
    assert agreement is not None and agreement.path_s == pytest.approx(0.04) and agreement.agrees
    assert summarise(discounted)["engine_ttft_path_s"] == pytest.approx(0.04)
    # Without the engine's mean there is no path to allow for: the same step disagrees.
    assert path_seconds([0.05, 0.05], None) == 0.0
    # A client faster on average than the engine clamps at no path, never a negative one.
    assert path_seconds([0.01], 0.02) == 0.0
