"""The options of `servescope load`, as pydantic models the settings bridge turns into flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from servescope.core.settings_cli import setting
from servescope.kit.load.client import Api
from servescope.kit.load.schedule import Arrival
from servescope.kit.load.workload import Workload, WorkloadKind, read_dataset

# The length of a prompt or of a reply, in tokens; the upper bound only stops a mistyped value.
Tokens = Annotated[int, Field(ge=1, le=1_000_000)]


class WorkloadSettings(BaseModel):
    """What the requests ask: prompts (random, a dataset, or the fixed one), lengths and the API."""

    workload: WorkloadKind = setting(
        "random",
        "--workload",
        "random: prompts of random common words (with --prefix-share of each shared); dataset: "
        "--dataset; fixed: one repeated word (nearly all prefix-cache hits on a real engine).",
    )
    prompt_tokens: Tokens = setting(128, "--prompt-tokens", "Mean prompt length, tokens.")
    output_tokens: Tokens = setting(
        32, "--output-tokens", "Mean output length, tokens (with --dataset: the longest reply asked for)."
    )
    spread: float = setting(
        0.0, "--spread", "Uniform spread of both lengths around their mean (0.2 = +-20 %).", ge=0, lt=1
    )
    prefix_share: float = setting(
        0.0,
        "--prefix-share",
        "Random prompts: the share of each prompt every request shares (a system prompt).",
        ge=0,
        le=1,
    )
    dataset: Path | None = setting(
        None,
        "--dataset",
        "JSONL: ShareGPT conversations, {prompt, output_tokens} or {prompt_tokens, output_tokens} "
        "lines (implies --workload dataset).",
    )
    api: Api = setting(
        "completions", "--api", "completions (/v1/completions) or chat (/v1/chat/completions)."
    )

    def build(self) -> tuple[Workload, int]:
        """The workload, and how many dataset lines were skipped; ValueError naming a bad dataset."""
        if self.dataset is not None:
            try:
                return read_dataset(self.dataset, max_output_tokens=self.output_tokens)
            except OSError as exc:
                raise ValueError(f"--dataset {self.dataset}: {exc}") from None
        if self.workload == "dataset":
            raise ValueError("--workload dataset needs --dataset FILE")
        workload = Workload(
            self.workload, self.prompt_tokens, self.output_tokens, self.spread, self.prefix_share
        )
        return workload, 0


class TargetSettings(BaseModel):
    """Which endpoint, and how each request is sent."""

    url: str = setting(
        "http://127.0.0.1:8000", "--url", "Base URL of the OpenAI-compatible server (without /v1)."
    )
    model: str = setting("", "--model", "Model name to ask for. Empty: the first of the server's /v1/models.")
    stream: bool = setting(
        True,
        "--stream/--no-stream",
        "Stream (SSE): TTFT is the first content token. Without it TTFT is the whole answer.",
    )
    ignore_eos: bool = setting(
        True, "--ignore-eos/--no-ignore-eos", "Ask vLLM to generate exactly the output length (ignore_eos)."
    )
    timeout_s: float = setting(
        30.0, "--timeout", "Per-request timeout, seconds (counted as error reason timeout).", gt=0, le=600
    )
    engine_metrics: bool = setting(
        True,
        "--engine-metrics/--no-engine-metrics",
        "Sample the server's /metrics during the run (vLLM's running/waiting and TTFT histogram).",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/").removesuffix("/v1")


class LoadSettings(BaseModel):
    """The load: loop mode, rate or concurrency, arrivals, lengths, bounds."""

    mode: Literal["open", "closed"] = setting(
        "open",
        "--mode",
        "open: arrivals on a precomputed schedule, latency "
        "from the scheduled time. closed: fixed concurrency (each "
        "client waits for its answer; hides queueing).",
    )
    rate: float = setting(1.0, "--rate", "Open loop: offered requests per second.", gt=0, le=100_000)
    concurrency: int = setting(1, "--concurrency", "Closed loop: concurrent clients.", ge=1, le=10_000)
    duration_s: float = setting(
        30.0,
        "--duration",
        "Seconds of schedule (the run drains its in-flight requests after).",
        gt=0,
        le=86_400,
    )
    arrival: Arrival = setting(
        "poisson", "--arrival", "constant, poisson, or gamma (burstiness set by --cv)."
    )
    cv: float = setting(
        1.0,
        "--cv",
        "Gamma arrivals: coefficient of variation of the gaps (1 = Poisson, >1 bursty).",
        gt=0,
        le=20,
    )
    warmup_s: float = setting(
        0.0,
        "--warmup",
        "Open loop: seconds of the same schedule sent first and left out of the latency figures.",
        ge=0,
        le=3600,
    )
    max_in_flight: int = setting(
        256,
        "--max-in-flight",
        "Cap on requests in flight; past it sends go out late (schedule lag), never dropped.",
        ge=1,
        le=10_000,
    )
    max_lag_s: float = setting(
        0.05, "--max-lag", "Scheduling-lag p99 bound, seconds; above it the run is invalid.", gt=0, le=60
    )
    seed: int = setting(0, "--seed", "Seed of the schedule and lengths.")


class OutputSettings(BaseModel):
    """Where the run reports and exposes itself."""

    metrics_port: int = setting(
        0,
        "--metrics-port",
        "Expose the run's own Prometheus metrics on this port (127.0.0.1); 0: not exposed.",
        ge=0,
        le=65535,
    )
    json_out: Path | None = setting(None, "--json", "Write the run's summary as JSON to this file.")
    ceiling: float = setting(
        0.0,
        "--ceiling",
        "The client's measured ceiling (req/s, `servescope load calibrate`); "
        "a result above 70 % of it is refused. 0: not checked.",
        ge=0,
    )
