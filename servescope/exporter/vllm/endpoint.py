"""One serving endpoint's state across scrapes: up or down, its errors, its GPUs, its own parser, and the
samples its page had dropped by the limits, with the series that say all of it."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from servescope.core import catalog as c
from servescope.core.catalog import bounds
from servescope.core.exposition import ExpositionParser, SeriesLimits
from servescope.exporter.exposition import Sample
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.join import EndpointGpus
from servescope.exporter.vllm.retention import Pod

log = logging.getLogger(__name__)


@dataclass
class EndpointState:
    url: str
    limits: SeriesLimits | None = None
    up: bool = False
    last_success: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    gpus: list[GpuProcess] = field(default_factory=list)
    joined: EndpointGpus = field(default_factory=EndpointGpus)
    ambiguous_logged: bool = False
    joined_at: float = float("-inf")
    dropped: Counter[str] = field(default_factory=Counter)  # samples refused by the limits, by reason
    pod: Pod | None = None  # the pod the kubelet said holds all its GPUs, when it last answered
    # The endpoint's own parser: what it remembers of this server's series serves this server's next
    # scrape, and one scrape of an endpoint runs at a time, so no two threads share one.
    parser: ExpositionParser = field(init=False)

    def __post_init__(self) -> None:
        self.parser = ExpositionParser(limits=self.limits)

    def count_dropped(self, dropped: Counter[str]) -> None:
        """Add what the last page had refused; say so once per reason."""
        for reason, count in sorted(dropped.items()):
            if not self.dropped[reason]:
                log.warning(
                    "endpoint %s: %d samples dropped (%s); servescope_vllm_series_dropped_total counts "
                    "them (limits: --vllm-max-series, --vllm-max-label-length, --vllm-max-label-values)",
                    self.url,
                    count,
                    reason,
                )
            self.dropped[reason] += count

    def health_samples(self, source: str) -> list[Sample]:
        labels = (source, self.url)
        samples = [
            Sample(c.SOURCE_UP_ENDPOINT, labels, 1 if self.up else 0),
            Sample(c.SOURCE_LAST_SUCCESS_ENDPOINT, labels, self.last_success),
        ]
        samples += [
            Sample(c.SOURCE_ERRORS_ENDPOINT, (*labels, reason), n)
            for reason, n in sorted(self.errors.items())
        ]
        samples += [
            Sample(bounds.SERIES_DROPPED, (self.url, reason), n) for reason, n in sorted(self.dropped.items())
        ]
        return samples
