"""Source `dcgm` from an existing dcgm-exporter: its DCGM_FI_* series mapped onto servescope's.

Many clusters already run NVIDIA's dcgm-exporter (GPU Operator); scraping it avoids a second DCGM
client on the node. Values are in DCGM units, exactly as dmon prints them, so the counters file's
scales apply unchanged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from servescope.core.catalog import bounds
from servescope.core.dcgm.counters import CounterField
from servescope.core.dcgm.field_table import BY_NAME, LINK_OF
from servescope.core.exposition import ExpositionParser, SeriesLimits
from servescope.exporter.dcgm.dmon_source import is_blank
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import Collection, Problem, SourceError
from servescope.exporter.sources.bounded_http import LARGE_BODIES, BoundedClient

# An 8-GPU dcgm-exporter page is about 60 KB; like the engines' cap (vllm/scrape.py), far above it.
MAX_BYTES = 4 * 1024 * 1024
# What one page may make the parser hold (core/exposition/limits.py): a node's page has a few hundred
# DCGM_FI_* series (8 GPUs x the fields configured, MIG instances beside them), far below each bound.
LIMITS = SeriesLimits()


@dataclass(frozen=True, slots=True)
class ExporterValue:
    gpu: str
    uuid: str
    hostname: str
    field_id: int
    name: str
    value: float
    mig_instance: str | None


def read_exporter(
    text: str, parser: ExpositionParser | None = None
) -> tuple[list[ExporterValue], Counter[str]]:
    """Every DCGM_FI_* sample with a known field id; also counts what was skipped and why (the parser's
    limits' drops too)."""
    values: list[ExporterValue] = []
    parser = parser or ExpositionParser(limits=LIMITS)
    families = parser.parse(text)
    skipped: Counter[str] = Counter(parser.dropped)
    for family in families:
        for sample in family.samples:
            # The parser (as prometheus_client's) appends "_total" to samples of counter families whose
            # name lacks it (dcgm-exporter types DCGM_FI_*_TOTAL as counters): look the original name up.
            known = BY_NAME.get(sample.name) or BY_NAME.get(sample.name.removesuffix("_total"))
            if known is None:
                skipped["unknown_series"] += 1
                continue
            if is_blank(sample.value):
                skipped["blank_sentinel"] += 1
                continue
            labels = sample.labels
            values.append(
                ExporterValue(
                    gpu=labels.get("gpu", ""),
                    uuid=labels.get("UUID") or labels.get("uuid", ""),
                    hostname=labels.get("Hostname") or labels.get("hostname", ""),
                    field_id=known.field_id,
                    name=known.name,
                    value=sample.value,
                    mig_instance=labels.get("GPU_I_ID") or None,
                )
            )
    return values, skipped


def to_samples(
    values: list[ExporterValue],
    fields: dict[int, CounterField],
    hostname: str,
    known: frozenset[str] | None = None,
    dropped: Counter[str] | None = None,
) -> list[Sample]:
    """Whole-GPU values of configured fields as servescope samples; MIG-instance rows are not mapped.

    With `known` (the GPU indexes NVML lists), values of other GPUs are dropped and counted in `dropped`
    (once per GPU): a dcgm-exporter of another node, or a page made up, adds no series here.
    """
    samples = []
    seen: set[tuple[str, int]] = set()
    strangers: set[str] = set()
    for v in values:
        field = fields.get(v.field_id)
        if field is None or v.mig_instance is not None or (v.gpu, v.field_id) in seen:
            continue
        if known is not None and v.gpu not in known:
            strangers.add(v.gpu)
            continue
        seen.add((v.gpu, v.field_id))
        labels: tuple[str, ...] = (v.gpu, v.uuid, hostname or v.hostname)
        if field.link is not None:
            labels = (*labels, str(LINK_OF.get(v.field_id, field.link)))
        samples.append(Sample(field.spec, labels, v.value * field.scale))
    if dropped is not None and strangers:
        dropped["unknown_gpu"] += len(strangers)
    return samples


_DROPPED = "DCGM samples dropped over the parser's limits"


class DcgmExporterSource:
    """Scrapes one dcgm-exporter URL per interval."""

    name = "dcgm"

    def __init__(
        self,
        url: str,
        counters: list[CounterField],
        *,
        hostname: str,
        directory: GpuDirectory | None = None,
        interval_seconds: float = 5.0,
        timeout: float = 2.0,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._directory = directory or GpuDirectory()
        self._dropped: Counter[str] = Counter()  # GPUs of the page NVML does not know, per page
        self._url = url
        self._fields = {f.field_id: f for f in counters}
        self._hostname = hostname
        # `timeout` is the whole scrape's: a dcgm-exporter trickling bytes fails the cycle with reason
        # timeout instead of holding it.
        self._client = BoundedClient(timeout=timeout, max_bytes=MAX_BYTES)
        self._parser = ExpositionParser(limits=LIMITS)  # one per scraped server: it learns the page

    def collect(self) -> Collection:
        with LARGE_BODIES.hold():  # a large page is fetched and parsed under the one large-body slot
            text = self._client.get(self._url).decode("utf-8", errors="replace")
            try:
                values, skipped = read_exporter(text, self._parser)
            except ValueError as exc:
                raise SourceError("parse", f"{self._url}: not a Prometheus exposition: {exc}") from None
        if not values:
            raise SourceError("no_dcgm_series", f"{self._url}: no DCGM_FI_* series found")
        problems = [
            Problem(
                reason, f"{n} blank DCGM values dropped" if reason == "blank_sentinel" else f"{n} {_DROPPED}"
            )
            for reason, n in sorted(skipped.items())
            if reason != "unknown_series"
        ]
        known = frozenset(self._directory.known()) or None  # NVML naming none: every GPU of the page
        samples = to_samples(values, self._fields, self._hostname, known, self._dropped)
        samples += [Sample(bounds.DCGM_ENTITIES_DROPPED, (r,), n) for r, n in sorted(self._dropped.items())]
        return Collection(samples, problems)

    def close(self) -> None:
        self._client.close()
