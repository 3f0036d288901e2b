"""Reading the exporter: one /metrics scrape parsed into samples, its JSON API, GPU lookup."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from servescope.core.exposition import ParsedSample, parse_exposition
from servescope.runbooks.actions.base import ActionError, RunContext
from servescope.runbooks.actions.fetch import Answer, UnreachableError, request
from servescope.runbooks.actions.trust import exporter_base


def _get(ctx: RunContext, path: str, params: dict[str, str] | None = None) -> Answer:
    """The answer of the alert's own exporter (or --exporter-url without one), within the bounds."""
    base = exporter_base(ctx)
    try:
        return request("GET", base + path, params=params, timeout=ctx.timeout_seconds)
    except UnreachableError as exc:
        node = f" of instance {ctx.instance!r}" if ctx.instance else ""
        hint = "is it running?" if ctx.instance else "is it running, and is --exporter-url right?"
        raise ActionError(f"cannot reach the exporter{node} at {base}: {exc}; {hint}") from None


def get_json(ctx: RunContext, path: str, params: dict[str, str] | None = None) -> Any:
    response = _get(ctx, path, params)
    if response.status_code != 200:
        try:
            detail = response.json().get("error", response.text[:300])
        except ValueError:
            detail = response.text[:300]
        raise ActionError(f"exporter {path}: HTTP {response.status_code}: {detail}")
    return response.json()


def get_text(ctx: RunContext, path: str, params: dict[str, str] | None = None) -> str:
    response = _get(ctx, path, params)
    if response.status_code != 200:
        raise ActionError(f"exporter {path}: HTTP {response.status_code}: {response.text[:300]}")
    return response.text


def gpu_api(ref: str, part: str) -> str:
    """The path of one GPU's resource in the exporter's GPU API (`ref`: its index or UUID, quoted)."""
    return f"/api/v1/gpus/{quote(ref, safe='')}/{part}"


@dataclass
class Metrics:
    """The samples of one scrape, by sample name (histogram samples under their _bucket/_sum/_count)."""

    samples: dict[str, list[ParsedSample]]

    def get(self, name: str, **match: str) -> list[ParsedSample]:
        return [s for s in self.samples.get(name, []) if all(s.labels.get(k) == v for k, v in match.items())]

    def value(self, name: str, **match: str) -> float | None:
        found = self.get(name, **match)
        return found[0].value if found else None

    def on_gpu(self, name: str, gpu: Gpu) -> list[ParsedSample]:
        """The samples of `name` that are the GPU's (by index, and by UUID where it has one)."""
        return self.get(name, gpu=gpu.index, uuid=gpu.uuid) if gpu.uuid else self.get(name, gpu=gpu.index)

    def gpu_value(self, name: str, gpu: Gpu) -> float | None:
        found = self.on_gpu(name, gpu)
        return found[0].value if found else None


def scrape(ctx: RunContext, prefix: str = "servescope_") -> Metrics:
    text = get_text(ctx, "/metrics")
    samples: dict[str, list[ParsedSample]] = defaultdict(list)
    for family in parse_exposition(text, keep=lambda name: name.startswith(prefix)):
        for sample in family.samples:
            samples[sample.name].append(sample)
    return Metrics(dict(samples))


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as the exporter's info series name it: the labels a runbook step's answer quotes."""

    index: str
    uuid: str
    hostname: str
    model: str


def find_gpu(metrics: Metrics, ref: str) -> Gpu:
    """The GPU an index or UUID (any case) names, from servescope_gpu_info (or servescope_gpu_up)."""
    rows = metrics.get("servescope_gpu_info") or metrics.get("servescope_gpu_up")
    for sample in rows:
        labels = sample.labels
        if labels.get("gpu") == ref or labels.get("uuid", "").lower() == ref.lower():
            return Gpu(
                labels["gpu"], labels.get("uuid", ""), labels.get("hostname", ""), labels.get("gpu_model", "")
            )
    known = ", ".join(f"{s.labels.get('gpu')} ({s.labels.get('uuid')})" for s in rows) or "none"
    raise ActionError(f"GPU {ref!r} is not in the exporter's metrics (known GPUs: {known})")


def scrape_gpu(ctx: RunContext, ref: str) -> tuple[Metrics, Gpu]:
    """One scrape of the exporter and the GPU that `ref` (an index or UUID) names in it."""
    metrics = scrape(ctx)
    return metrics, find_gpu(metrics, ref)
