"""NVLink series: per-GPU link counts and error sums by default, per-link series as an option.

A GPU has up to 18 links and 4 counters per link: per link that is 90 series per GPU, most of them
zero. The default sums each counter over the GPU's links. An inactive link is not read, so its last
value read is kept in the sum: the per-GPU counter never goes backwards when a link drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servescope.core import catalog as c
from servescope.exporter.exposition import Sample
from servescope.exporter.stores.nvlink import LinkState, NvlinkLinks

Labels = tuple[str, ...]


@dataclass(frozen=True)
class LinkReading:
    """One link of one GPU in one cycle: its state, and its counters when it was active."""

    link: int
    active: bool
    errors: dict[str, int] = field(default_factory=dict)  # counter kind -> value, where read


class NvlinkSeries:
    """Turns one cycle's link readings of a GPU into samples; remembers each link's last counters."""

    def __init__(
        self, kinds: tuple[str, ...], *, per_link: bool = False, store: NvlinkLinks | None = None
    ) -> None:
        self.per_link = per_link
        self.store = store
        self._kinds = kinds
        self._last: dict[tuple[str, int], dict[str, int]] = {}  # (uuid, link) -> kind -> value

    def samples(self, gpu: Labels, uuid: str, readings: list[LinkReading]) -> list[Sample]:
        """Links and links up per GPU, errors summed per GPU by kind; per link too when asked."""
        if not readings:
            return []
        up = sum(1 for r in readings if r.active)
        out = [Sample(c.NVLINK_LINKS, gpu, len(readings)), Sample(c.NVLINK_LINKS_UP, gpu, up)]
        totals: dict[str, int] = {}
        states = []
        for reading in readings:
            known = self._last.setdefault((uuid, reading.link), {})
            known.update(reading.errors)
            for kind, value in known.items():
                totals[kind] = totals.get(kind, 0) + value
            states.append(LinkState(reading.link, reading.active, dict(known)))
            if self.per_link:
                out += self._per_link(gpu, reading)
        if self.store is not None:
            self.store.update(gpu, tuple(states))
        out += [Sample(c.NVLINK_ERRORS, (*gpu, kind), totals[kind]) for kind in self._kinds if kind in totals]
        return out

    def _per_link(self, gpu: Labels, reading: LinkReading) -> list[Sample]:
        labels = (*gpu, str(reading.link))
        out = [Sample(c.NVLINK_UP, labels, 1 if reading.active else 0)]
        out += [
            Sample(c.NVLINK_LINK_ERRORS, (*labels, kind), reading.errors[kind])
            for kind in self._kinds
            if kind in reading.errors
        ]
        return out
