"""Counters read from an engine's own /metrics page, through the project's exposition parser."""

from __future__ import annotations

import httpx

from servescope.core.exposition import parse_exposition


def counter_total(base_url: str, name: str) -> float:
    """`vllm:<name>_total` summed over its series, as the engine at `base_url` counts it now."""
    page = httpx.get(f"{base_url}/metrics", trust_env=False, timeout=10).text
    wanted = f"vllm:{name}_total"
    return sum(s.value for family in parse_exposition(page) for s in family.samples if s.name == wanted)
