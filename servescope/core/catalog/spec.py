"""What a metric family is: name, kind, help, labels, and the rules every name obeys."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from servescope.core.catalog.revision import REVISION_LABEL


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"  # samples carry a suffix: _bucket (with le), _sum, _count


GPU_LABELS = ("gpu", "uuid", "hostname")
# The workload a series belongs to, from the kubelet's pod-resources API: rendered only when known (an
# empty value is no label to Prometheus, and a node without Kubernetes exports the same lines as before).
POD_LABELS = ("namespace", "pod", "container")
# The labels rendered only when known: the workload's, and the rollout revision of its pod (from the pod's
# labels, catalog.revision). A pod with no revision label exports the same lines as before.
OPTIONAL_LABELS = frozenset((*POD_LABELS, REVISION_LABEL))

_NAME = re.compile(r"^servescope_[a-z0-9_]+$")
_LABEL = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported metric family."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"metric {self.name!r}: name must match {_NAME.pattern}")
        if (self.kind is Kind.COUNTER) != self.name.endswith("_total"):
            raise ValueError(f"metric {self.name!r}: counters, and only counters, end in _total")
        if self.kind is Kind.HISTOGRAM and (
            "le" in self.labels or self.name.endswith(("_bucket", "_count", "_sum"))
        ):
            raise ValueError(
                f"metric {self.name!r}: a histogram's name and labels must not carry its suffixes"
            )
        for label in self.labels:
            if not _LABEL.match(label):
                raise ValueError(f"metric {self.name!r}: label {label!r} is not snake_case")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"metric {self.name!r}: duplicate label")


def gauge(name: str, help_: str, labels: tuple[str, ...], source: str) -> MetricSpec:
    return MetricSpec(name, Kind.GAUGE, help_, labels, source)


def counter(name: str, help_: str, labels: tuple[str, ...], source: str) -> MetricSpec:
    return MetricSpec(name, Kind.COUNTER, help_, labels, source)
