"""What `canary analyze` reads from Prometheus: per revision of one model, over the window, from the raw
series (increase() of the counters and histogram buckets), in the topology the alerts config names.

Model and revision names reach PromQL only as escaped string literals.
"""

from __future__ import annotations

from dataclasses import dataclass

from servescope.core import catalog as c
from servescope.core.canary_exprs import FAILED_REASONS
from servescope.core.catalog.revision import REVISION_LABEL
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel
from servescope.kit.canary.histograms import Histogram, parse_le
from servescope.kit.canary.prometheus import Prometheus, literal
from servescope.kit.load.user_ids import BUCKET_LABEL, REVISION_HEADER_LABEL, USER_REQUESTS

LATENCY_METRICS = {"ttft": c.TTFT.name, "itl": c.ITL.name, "e2e": c.E2E.name}


@dataclass(frozen=True)
class Target:
    """One model of a Prometheus, its series named as the alerts config's topology names them."""

    prometheus: Prometheus
    cfg: AlertsConfig
    model: str
    window: str

    def series(self, name: str, revision: str | None, *matchers: str) -> str:
        own = [f"model_name={literal(self.model)}", *matchers]
        if revision is not None:
            own.append(f"{REVISION_LABEL}={literal(revision)}")
        return sel(self.cfg, name, *own)

    def increase(self, name: str, revision: str | None, *matchers: str) -> str:
        return f"increase({self.series(name, revision, *matchers)}[{self.window}])"


@dataclass(frozen=True)
class RevisionData:
    """One revision's window: its latency histograms, finished requests by reason, preemptions and KV use."""

    revision: str
    histograms: dict[str, Histogram]  # ttft, itl, e2e: those the revision exports
    finished: dict[str, float]  # by finished_reason
    preemptions: float | None  # None: not exported
    kv_usage: float | None = None

    @property
    def requests(self) -> float:
        """Requests of the window: those that got a first token (the TTFT histogram's count)."""
        ttft = self.histograms.get("ttft")
        return ttft.count if ttft is not None else 0.0


def traffic(target: Target) -> dict[str, float]:
    """Requests per revision of the model over the window (every revision that served some)."""
    count = target.increase(c.TTFT.name + "_count", None)
    found = target.prometheus.by(f"sum by ({REVISION_LABEL}) ({count})", REVISION_LABEL)
    return {revision: requests for revision, requests in found.items() if requests > 0}


def histogram(target: Target, sli: str, revision: str) -> Histogram | None:
    """The revision's histogram of an SLI over the window; None when it exports none."""
    buckets = target.increase(LATENCY_METRICS[sli] + "_bucket", revision)
    found = target.prometheus.by(f"sum by (le) ({buckets})", "le")
    parsed: dict[float, float] = {}
    for le, value in found.items():
        try:
            parsed[parse_le(le)] = value
        except ValueError:
            continue
    return Histogram.from_buckets(parsed) if parsed else None


def revision_data(target: Target, revision: str) -> RevisionData:
    """Everything the analysis judges of one revision."""
    prometheus = target.prometheus
    histograms = {sli: h for sli in LATENCY_METRICS if (h := histogram(target, sli, revision)) is not None}
    finished = prometheus.by(
        f"sum by (finished_reason) ({target.increase(c.REQUESTS_FINISHED.name, revision)})", "finished_reason"
    )
    preemptions = prometheus.scalar(f"sum({target.increase(c.PREEMPTIONS.name, revision)})")
    usage = f"avg_over_time({target.series(c.KV_USAGE.name, revision)}[{target.window}])"
    return RevisionData(revision, histograms, finished, preemptions, prometheus.scalar(f"avg({usage})"))


def failed(finished: dict[str, float]) -> float:
    """Requests that ended in one of the failed reasons (abort, error)."""
    reasons = set(FAILED_REASONS.split("|"))
    return sum(count for reason, count in finished.items() if reason in reasons)


@dataclass(frozen=True)
class BucketTraffic:
    """Requests the load client sent from one user bucket over the window, by the revision that answered
    (empty when the gateway names none)."""

    bucket: str
    revision: str
    requests: float


def user_buckets(target: Target) -> list[BucketTraffic]:
    """What `servescope load --user-id-header` counted per user bucket, when Prometheus scrapes it."""
    query = f"sum by ({BUCKET_LABEL}, {REVISION_HEADER_LABEL}) (increase({USER_REQUESTS}[{target.window}]))"
    found = [
        BucketTraffic(labels.get(BUCKET_LABEL, ""), labels.get(REVISION_HEADER_LABEL, ""), value)
        for labels, value in target.prometheus.vector(query)
        if value > 0
    ]
    return sorted(found, key=lambda item: (item.bucket, item.revision))
