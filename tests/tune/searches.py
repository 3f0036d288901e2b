"""The capacity search of a study under test: short steps, no minimum request count, at most two
bisections, so that each trial's search takes seconds on the simulated engine."""

from __future__ import annotations


def short_capacity(duration_s: float, slo: str | None = None, **more: object) -> dict[str, object]:
    """The `capacity` section of a test's search space; `more` adds or overrides settings."""
    slos = {} if slo is None else {"slo": [slo]}
    return {**slos, "duration_s": duration_s, "min_requests": 0, "max_parts": 2, **more}
