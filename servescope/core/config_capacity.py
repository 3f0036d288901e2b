"""The capacity-regression fields of the alerts config: one definition for the daily baseline alert, the
weekly knee's alert and `capacity compare` (AlertsConfig inherits them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CapacityRegressionConfig(BaseModel):
    """What counts as a capacity regression, and how the weekly job's result is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capacity_regression_drop: float = Field(
        0.10,
        gt=0,
        lt=1,
        description="A regression: more than this share of capacity lost against the baseline at comparable "
        "load. Daily (ServescopeThroughputBelowBaseline): output tokens/s per GPU this far below a day and a "
        "week ago at a running batch within 20% of theirs. Weekly (ServescopeCapacityRegression, `capacity "
        "compare`): the baseline's load at (1 - this) x its knee no longer served within the SLO, "
        "significantly slower than the baseline.",
    )
    capacity_regression_for: str = Field(
        "5m", description="How long the weekly job's regression result stands before it fires."
    )
    capacity_result_window: str = Field(
        "8d", description="How far back the weekly job's last result is read (a week and a day)."
    )
