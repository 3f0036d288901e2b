"""What makes a canary revision worse than the stable one: the thresholds the canary alert, the rollout
controllers' templates and `servescope canary analyze` share (the `canary` section of the alerts config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servescope.core.durations import is_duration, parse_duration


class CanaryConfig(BaseModel):
    """Defaults judge a canary that takes 10 % of a model's traffic within 10 to 20 minutes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: str = Field(
        "10m",
        description="Both revisions are compared over this window (the alert, the templates' queries, and "
        "`canary analyze --window` by default).",
    )
    min_requests: int = Field(
        500,
        ge=1,
        description="Requests each revision must have served in the window before it is judged: fewer is "
        "'not enough data', never a verdict. 500 puts 5 requests above a P99.",
    )
    latency_ratio: float = Field(
        1.5,
        gt=1,
        description="P99 time to first token or inter-token latency of the canary, as a multiple of the "
        "stable revision's, above which it is worse.",
    )
    z: float = Field(
        3.0,
        gt=0,
        description="z-score of the two-proportion test above which the canary's share of requests over the "
        "SLO bound (or of failed requests) is significantly larger than the stable's (one-sided p 0.0013).",
    )
    slo_miss_increase: float = Field(
        0.005,
        gt=0,
        lt=1,
        description="Increase of the share of requests over an SLO bound (time to first token, end to end) "
        "that makes a significant difference worth acting on: half the default 1 % error budget.",
    )
    error_increase: float = Field(
        0.01,
        gt=0,
        lt=1,
        description="Increase of the share of requests that end in abort or error that is worth acting on.",
    )
    worse_for: str = Field("10m", description="`for` of ServescopeCanaryWorseThanStable (the ticket).")
    burn_for: str = Field("2m", description="`for` of ServescopeCanarySloBurn (the page).")
    alpha: float = Field(
        0.05,
        gt=0,
        lt=0.5,
        description="`canary analyze`: the chance of calling an equal canary worse, shared by all its tests "
        "(Bonferroni).",
    )
    min_effect: float = Field(
        0.56,
        gt=0.5,
        lt=1,
        description="`canary analyze`: the probability that a canary request is slower than a stable one "
        "(Mann-Whitney's effect size) from which a significant latency difference counts (0.56: small).",
    )
    analysis_interval: str = Field(
        "5m", description="Argo Rollouts' and Flagger's interval between two measurements."
    )
    analysis_count: int = Field(
        3,
        ge=1,
        description="Argo Rollouts: measurements per analysis (one rollout step of interval x count).",
    )
    failure_limit: int = Field(
        1,
        ge=0,
        description="Argo Rollouts' failureLimit: failed measurements tolerated before the rollout aborts "
        "(Flagger's threshold is one more: the failed checks that roll back).",
    )
    inconclusive_limit: int = Field(
        1,
        ge=0,
        description="Argo Rollouts' inconclusiveLimit: measurements without enough requests tolerated "
        "before the rollout pauses for a person to judge.",
    )

    @model_validator(mode="after")
    def _durations(self) -> CanaryConfig:
        for name in ("window", "worse_for", "burn_for", "analysis_interval"):
            value = getattr(self, name)
            if not is_duration(value):
                raise ValueError(f"canary.{name}: {value!r} is not a Prometheus duration such as 5m")
        return self

    @property
    def window_seconds(self) -> float:
        return parse_duration(self.window)
