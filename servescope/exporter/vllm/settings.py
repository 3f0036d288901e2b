"""The serving-engines area of the exporter's settings: where the engines are, how they are found and
scraped, and what one engine's page may make the exporter hold."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

from servescope.core.exposition import SeriesLimits
from servescope.core.settings_cli import area_config, repeated, setting

_LIMITS = SeriesLimits()


def _items(value: object, separators: str) -> object:
    """From the environment (or a flag value) one string holds several items: split it."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value
    found = []
    for item in items:
        text = str(item)
        for separator in separators[1:]:
            text = text.replace(separator, separators[0])
        found += text.split() if separators[0] == " " else [p for p in text.split(separators[0]) if p]
    return found


class VllmSettings(BaseSettings):
    model_config = area_config("vllm")

    urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        json_schema_extra={"cli": "--vllm-url"},
        description="Serving endpoints' /metrics URLs (repeat the flag; in the environment, separate with "
        "spaces or commas). Empty: discover the engines on this node.",
    )
    discovery: bool = setting(
        True,
        "--discovery/--no-discovery",
        "With no --vllm-url, find serving engines from NVML's GPU processes and their listening ports, "
        "every minute. Only a serving engine's API server is ever probed: vLLM, SGLang, TGI, or a process "
        "--engine-process names.",
    )
    engine_processes: Annotated[list[str], NoDecode] = repeated(
        list,
        "--engine-process",
        "Regular expression (Python, searched) matching the process title or command line of another "
        "serving engine's API server, e.g. `my_server\\.py` (repeat the flag; in the environment, separate "
        "with spaces). Discovery probes such a process's listeners as it does vLLM's.",
    )
    interval_seconds: float = setting(5.0, "--vllm-interval", "Seconds between scrapes.", ge=0.5, le=300)
    timeout_seconds: float = setting(
        2.0,
        "--vllm-timeout",
        "Total seconds one endpoint's scrape may take, however slowly it sends; past it the endpoint is "
        "down with reason timeout and the others are published without waiting for it.",
        gt=0,
        le=60,
    )
    max_bytes: int = setting(
        4 * 1024 * 1024,
        "--vllm-max-bytes",
        "Larger responses (counted decompressed) are refused, reason too_large, as soon as they pass it. "
        "Beyond 256 KiB one page at a time is fetched and parsed; the DaemonSet's memory limit is sized for "
        "the default.",
        ge=1024,
        le=64 * 1024 * 1024,
    )
    max_series: int = setting(
        _LIMITS.max_series,
        "--vllm-max-series",
        "Samples one endpoint's page may add (of the families read); the rest are dropped and counted in "
        'servescope_vllm_series_dropped_total{reason="series_limit"}. vLLM exports about 600 per engine.',
        ge=100,
        le=1_000_000,
    )
    max_label_value_length: int = setting(
        _LIMITS.max_label_value_length,
        "--vllm-max-label-length",
        "Characters a label value of an engine's series may have; a series with a longer one is dropped "
        "(reason label_value_length).",
        ge=16,
        le=65536,
    )
    max_label_values: int = setting(
        _LIMITS.max_label_values,
        "--vllm-max-label-values",
        "Distinct values one label may take in one family of an endpoint's page (engines, models, buckets); "
        "the samples bringing more are dropped (reason label_values_limit).",
        ge=8,
        le=100_000,
    )
    passthrough: bool = setting(
        False,
        "--passthrough/--no-passthrough",
        "Also re-export the engines' own families listed by --passthrough-family, with an `endpoint` label. "
        "Off: Prometheus usually scrapes the engines itself, and their series would be stored twice.",
    )
    passthrough_families: Annotated[list[str], NoDecode] = repeated(
        list,
        "--passthrough-family",
        "With --passthrough: a family to re-export, by name or shell-style pattern (e.g. `vllm:request_*`; "
        "repeat the flag; in the environment, separate with spaces or commas). None: the families "
        "servescope itself reads (KV usage, requests, tokens, latency histograms).",
    )
    procfs: str = setting(
        "/proc",
        "--procfs",
        "Where /proc is: the engine-GPU join reads listening sockets and process trees there (in a "
        "container, mount the host's and use hostPID).",
    )

    @field_validator("urls", "passthrough_families", mode="before")
    @classmethod
    def _split_lists(cls, value: object) -> object:
        # From the environment (or a flag value) "a,b c" means three items.
        return _items(value, " ,")

    @field_validator("engine_processes", mode="before")
    @classmethod
    def _split_patterns(cls, value: object) -> object:
        # From the environment, one string: spaces separate (a pattern may hold a comma, as in {1,3}).
        # Each flag is one whole pattern, spaces included.
        return value.split() if isinstance(value, str) else value

    @field_validator("engine_processes")
    @classmethod
    def _compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return value

    def limits(self) -> SeriesLimits:
        return SeriesLimits(self.max_series, self.max_label_value_length, self.max_label_values)
