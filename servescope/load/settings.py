"""The options of `servescope load`, as pydantic models the settings bridge turns into flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic.config import JsonDict

from servescope.load.client import Api
from servescope.load.schedule import Arrival


def _flag(name: str) -> JsonDict:
    return {"cli": name}


class TargetSettings(BaseModel):
    """Which endpoint, and what each request asks of it."""

    url: str = Field(
        "http://127.0.0.1:8000",
        json_schema_extra=_flag("--url"),
        description="Base URL of the OpenAI-compatible server (without /v1).",
    )
    model: str = Field(
        "",
        json_schema_extra=_flag("--model"),
        description="Model name to ask for. Empty: the first of the server's /v1/models.",
    )
    api: Api = Field(
        "completions",
        json_schema_extra=_flag("--api"),
        description="completions (/v1/completions) or chat (/v1/chat/completions).",
    )
    stream: bool = Field(
        True,
        json_schema_extra=_flag("--stream/--no-stream"),
        description="Stream (SSE): TTFT is the first content token. Without it TTFT is the whole answer.",
    )
    ignore_eos: bool = Field(
        True,
        json_schema_extra=_flag("--ignore-eos/--no-ignore-eos"),
        description="Ask vLLM to generate exactly the output length (ignore_eos).",
    )
    timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        json_schema_extra=_flag("--timeout"),
        description="Per-request timeout, seconds (counted as error reason timeout).",
    )
    engine_metrics: bool = Field(
        True,
        json_schema_extra=_flag("--engine-metrics/--no-engine-metrics"),
        description="Sample the server's /metrics during the run (vLLM's "
        "running/waiting and TTFT histogram).",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/").removesuffix("/v1")


class LoadSettings(BaseModel):
    """The load: loop mode, rate or concurrency, arrivals, lengths, bounds."""

    mode: Literal["open", "closed"] = Field(
        "open",
        json_schema_extra=_flag("--mode"),
        description="open: arrivals on a precomputed schedule, latency "
        "from the scheduled time. closed: fixed concurrency (each "
        "client waits for its answer; hides queueing).",
    )
    rate: float = Field(
        1.0,
        gt=0,
        le=100_000,
        json_schema_extra=_flag("--rate"),
        description="Open loop: offered requests per second.",
    )
    concurrency: int = Field(
        1,
        ge=1,
        le=10_000,
        json_schema_extra=_flag("--concurrency"),
        description="Closed loop: concurrent clients.",
    )
    duration_s: float = Field(
        30.0,
        gt=0,
        le=86_400,
        json_schema_extra=_flag("--duration"),
        description="Seconds of schedule (the run drains its in-flight requests after).",
    )
    arrival: Arrival = Field(
        "poisson",
        json_schema_extra=_flag("--arrival"),
        description="constant, poisson, or gamma (burstiness set by --cv).",
    )
    cv: float = Field(
        1.0,
        gt=0,
        le=20,
        json_schema_extra=_flag("--cv"),
        description="Gamma arrivals: coefficient of variation of the gaps (1 = Poisson, >1 bursty).",
    )
    prompt_tokens: int = Field(
        128,
        ge=1,
        le=1_000_000,
        json_schema_extra=_flag("--prompt-tokens"),
        description="Mean prompt length, tokens.",
    )
    output_tokens: int = Field(
        32,
        ge=1,
        le=1_000_000,
        json_schema_extra=_flag("--output-tokens"),
        description="Mean output length, tokens.",
    )
    spread: float = Field(
        0.0,
        ge=0,
        lt=1,
        json_schema_extra=_flag("--spread"),
        description="Uniform spread of both lengths around their mean (0.2 = +-20 %).",
    )
    shapes: Path | None = Field(
        None,
        json_schema_extra=_flag("--shapes"),
        description="JSONL of {prompt_tokens, output_tokens} per line, drawn from instead of the means.",
    )
    max_in_flight: int = Field(
        256,
        ge=1,
        le=10_000,
        json_schema_extra=_flag("--max-in-flight"),
        description="Cap on requests in flight; past it sends go out late (schedule lag), never dropped.",
    )
    max_lag_s: float = Field(
        0.05,
        gt=0,
        le=60,
        json_schema_extra=_flag("--max-lag"),
        description="Scheduling-lag p99 bound, seconds; above it the run is invalid.",
    )
    seed: int = Field(0, json_schema_extra=_flag("--seed"), description="Seed of the schedule and lengths.")


class OutputSettings(BaseModel):
    """Where the run reports and exposes itself."""

    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        json_schema_extra=_flag("--metrics-port"),
        description="Expose the run's own Prometheus metrics on this port (127.0.0.1); 0: not exposed.",
    )
    json_out: Path | None = Field(
        None, json_schema_extra=_flag("--json"), description="Write the run's summary as JSON to this file."
    )
    ceiling: float = Field(
        0.0,
        ge=0,
        json_schema_extra=_flag("--ceiling"),
        description="The client's measured ceiling (req/s, `servescope load calibrate`); "
        "a result above 70 % of it is refused. 0: not checked.",
    )
