"""PromQL that compares two revisions of a model on the per-revision records: the canary alert's records
and the rollout controllers' queries (deploy render --canary) come from these builders.

A `Side` says how the canary's or the stable's series are picked out of a per-revision record: label
matchers (Argo Rollouts passes both revisions' hashes), a vector they must match (Flagger names pods; the
alert takes the revision with most traffic as stable and every other one as a canary), or both. Every
comparison is the canary's figure against the stable's, joined on `model_name`: the result carries the
canary's `model_name` and `revision`, and the stable's revision as `stable_revision`.
"""

from __future__ import annotations

from dataclasses import dataclass

from servescope.core.config import AlertsConfig

BY = "model_name, revision"
SLO_SLIS = ("ttft", "e2e")  # the SLIs with a bound: the share of requests over it is judged
LATENCIES = ("ttft", "itl")  # the histograms whose P99 is judged (ITL: per token, no bound)
FAILED_REASONS = "abort|error"


def record(metric: str, operation: str, level: str = "model_revision") -> str:
    """A per-revision record's name, `<level>:servescope_<metric>:<operation>`: the 5 min rates' end in
    rate5m, the canary window's figures carry the window (increase10m, ratio_rate10m, p99_rate10m)."""
    return f"{level}:servescope_{metric}:{operation}"


FINISHED = record("requests_finished", "rate5m")
FAILED = record("requests_failed", "rate5m")
ERROR_RATIO = record("request_errors", "ratio_rate5m")
PREEMPTIONS = record("preemptions", "rate5m")
KV_USAGE = record("kv_cache_usage", "avg")


@dataclass(frozen=True)
class Side:
    """How one revision's series are selected: matchers inside every record read, then `keep` appended
    (` and on (model_name, revision) X`, ` unless ...`), or neither."""

    matchers: str = ""
    keep: str = ""

    def read(self, record: str) -> str:
        selector = f"{record}{{{self.matchers}}}" if self.matchers else record
        return f"({selector}{self.keep})" if self.keep else selector


@dataclass(frozen=True)
class Pair:
    """The canary and the stable side, compared on the window records with the thresholds of `cfg.canary`."""

    cfg: AlertsConfig
    canary: Side
    stable: Side

    @property
    def window(self) -> str:
        return self.cfg.canary.window

    def versus(self, canary: str, op: str, stable: str) -> str:
        """`canary op stable`, the stable's figure brought onto the canary's series (`stable_revision`)."""
        named = f'label_replace({stable}, "stable_revision", "$1", "revision", "(.*)")'
        one = f"max by (model_name, stable_revision) ({named})"
        return f"({canary} {op} on (model_name) group_left (stable_revision) {one})"

    def enough(self, expr: str, count: str) -> str:
        """`expr` only where both revisions served min_requests in the window (else nothing: no verdict)."""
        least = self.cfg.canary.min_requests
        return (
            f"({expr} and on ({BY}) {self.canary.read(count)} >= {least}"
            f" and on (model_name) {self.stable.read(count)} >= {least})"
        )

    def latency_ratio(self, latency: str) -> str:
        """The canary's P99 over the window as a multiple of the stable's, where both have enough requests."""
        p99 = record(f"{latency}_seconds", f"p99_rate{self.window}")
        ratio = self.versus(self.canary.read(p99), "/", self.stable.read(p99))
        return self.enough(ratio, record("ttft_slo_requests", f"increase{self.window}"))

    def share_increase(self, share: str, count: str) -> str:
        """The canary's share of bad requests minus the stable's where a two-proportion z-test finds it
        larger (z >= canary.z), else 0; nothing where either revision has too few requests."""
        c_share, s_share = self.canary.read(share), self.stable.read(share)
        c_count, s_count = self.canary.read(count), self.stable.read(count)
        diff = self.versus(c_share, "-", s_share)
        bad = self.versus(f"{c_share} * {c_count}", "+", f"{s_share} * {s_count}")
        pooled = f"({bad} / {self.versus(c_count, '+', s_count)})"
        inverse = self.versus(f"1 / {c_count}", "+", f"1 / {s_count}")
        z = f"{diff} / sqrt({pooled} * (1 - {pooled}) * {inverse})"
        significant = f"({diff} and {z} >= {self.cfg.canary.z:g} or 0 * {diff})"
        return self.enough(significant, count)

    def slo_miss_increase(self, sli: str) -> str:
        """The canary's share of requests over the SLI's bound minus the stable's (0 unless significant)."""
        w = self.window
        return self.share_increase(
            record(f"{sli}_slo_errors", f"ratio_rate{w}"), record(f"{sli}_slo_requests", f"increase{w}")
        )

    def error_increase(self) -> str:
        """The canary's share of failed requests (abort, error) minus the stable's, 0 unless significant."""
        w = self.window
        return self.share_increase(
            record("request_errors", f"ratio_rate{w}"), record("requests_finished", f"increase{w}")
        )
