"""The options of `servescope canary analyze`, as a model the settings bridge turns into flags."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationInfo, field_validator

from servescope.core.durations import is_duration
from servescope.core.settings_cli import setting


def parse_time(text: str) -> float:
    """Unix seconds, or an RFC 3339 time (`2026-08-01T12:00:00Z`); ValueError naming it otherwise."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"{text!r} is neither unix seconds nor an RFC 3339 time") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a time after 1970")
    return value


class AnalyzeSettings(BaseModel):
    """Which model and revisions, from which Prometheus, when, and where the reports go."""

    prometheus: str = setting("http://127.0.0.1:9090", "--prometheus", "Base URL of Prometheus' HTTP API.")
    model: str = setting("", "--model", "The model (`model_name`) whose revisions are compared.")
    canary: str = setting(
        "",
        "--canary",
        "The canary's `revision` label (its rollouts-pod-template-hash, pod-template-hash or "
        "app.kubernetes.io/version).",
    )
    stable: str = setting(
        "",
        "--stable",
        "The stable revision. Empty: the one with most requests over the window but the canary.",
    )
    window: str = setting(
        "", "--window", "Compare over this window. Empty: canary.window of the config (10m)."
    )
    at: str = setting(
        "",
        "--at",
        "Judge at this time: unix seconds or RFC 3339 (2026-08-01T12:00:00Z). Empty: now. With --watch, "
        "the first analysis (a past time replays a finished rollout).",
    )
    config: Path | None = setting(
        None, "--config", "Alerts config file: SLO bounds, selectors, topology, the `canary` thresholds."
    )
    topology: Literal["", "exporter", "podmonitor"] = setting(
        "",
        "--topology",
        "Whose series to read: the exporter's (servescope_serving_*) or the engines' own (vllm:*, "
        "PodMonitor). Empty: the config's.",
    )
    json_out: Path | None = setting(None, "--json", "Write the analysis as JSON to this file.")
    markdown_out: Path | None = setting(None, "--markdown", "Write the report as Markdown to this file.")
    html_out: Path | None = setting(
        None,
        "--html",
        "Write the report as a self-contained HTML page (both distributions drawn) to this file.",
    )
    watch: bool = setting(
        False,
        "--watch/--no-watch",
        "Analyse again every --interval, over the rollout's steps, until a rollback or --count analyses; "
        "the reports are rewritten each time and the exit status is the last verdict's.",
    )
    interval: str = setting("1m", "--interval", "With --watch: time between two analyses.")
    count: int = setting(0, "--count", "With --watch: stop after this many analyses (0: no limit).", ge=0)
    timeout_s: float = setting(
        10.0, "--timeout", "Seconds each query may take, answer included.", gt=0, le=300
    )

    @field_validator("model", "canary")
    @classmethod
    def _given(cls, value: str) -> str:
        if not value:
            raise ValueError("required")
        return value

    @field_validator("window", "interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if value and not is_duration(value):
            raise ValueError(f"{value!r} is not a Prometheus duration such as 10m")
        return value

    @field_validator("at")
    @classmethod
    def _time(cls, value: str) -> str:
        if value:
            parse_time(value)
        return value

    @field_validator("prometheus")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("stable")
    @classmethod
    def _not_the_canary(cls, value: str, info: ValidationInfo) -> str:
        if value and value == info.data.get("canary"):
            raise ValueError(f"{value!r} is the canary itself: name the stable revision, or leave it out")
        return value
