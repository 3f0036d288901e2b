"""The canary scenario: which engine becomes which revision when, and that its build is what it claims:
about twice the stable revision's P99 time to first token, measured through vLLM's TTFT buckets as the
alert and `canary analyze` measure it."""

from __future__ import annotations

import bisect

import pytest

from servescope_sim import canary_scenario
from servescope_sim.canary_scenario import CANARY_AT_ENV, PREFILL_FACTOR
from servescope_sim.cluster import CANARY_REVISION, STABLE_REVISION
from servescope_sim.engine_stats import TTFT_BUCKETS
from servescope_sim.engines import gpu_groups
from servescope_sim.registry import make_scenario
from servescope_sim.scenarios import PACES, STEADY_ENGINE
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine

A, B = STABLE_REVISION, CANARY_REVISION


def test_engine_3_becomes_the_canary_at_4_00_and_nothing_else_changes() -> None:
    scenario = make_scenario("canary", pace="demo", layout=gpu_groups(8, 4))
    assert scenario.needs_cluster
    start = PACES["demo"].canary_start_seconds
    assert start == 240.0
    assert scenario.revisions(start - 1, 4) == [A, A, A, A]
    assert scenario.engine_loads(start - 1, 4) == [STEADY_ENGINE] * 4
    assert scenario.revisions(start, 4) == [A, A, A, B]
    loads = scenario.engine_loads(start, 4)
    assert loads[:3] == [STEADY_ENGINE] * 3
    assert loads[3].prefill_factor == PREFILL_FACTOR and loads[3].arrival_rate == STEADY_ENGINE.arrival_rate
    (_, stable), (at, what) = scenario.timeline()
    assert A in stable
    assert at == start and "engine 3 (GPUs 6,7) becomes revision 84b5c7f9d6" in what


def test_on_a_smaller_node_the_last_engine_is_the_canary_and_a_single_engine_never_is() -> None:
    scenario = make_scenario("canary", pace="demo", layout=gpu_groups(4, 2))
    assert scenario.revisions(300, 2) == [A, B]
    assert scenario.revisions(300, 1) == [A]  # no stable engine beside it: no canary
    assert scenario.engine_loads(300, 1) == [STEADY_ENGINE]


def test_the_environment_moves_the_canary_s_start_and_a_bad_value_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CANARY_AT_ENV, "60")
    assert make_scenario("canary", pace="demo", layout=gpu_groups(4, 4)).revisions(60, 4)[3] == B
    monkeypatch.setenv(CANARY_AT_ENV, "soon")
    with pytest.raises(ValueError, match="SERVESCOPE_SIM_CANARY_AT='soon': not a number of seconds"):
        canary_scenario.canary(PACES["demo"], gpu_groups(4, 4))


def _bucket_p99(ttfts: list[float]) -> float:
    """histogram_quantile(0.99) over vLLM's TTFT buckets, as Prometheus interpolates it."""
    counts = [0] * len(TTFT_BUCKETS)
    for value in ttfts:
        counts[min(bisect.bisect_left(TTFT_BUCKETS, value), len(TTFT_BUCKETS) - 1)] += 1
    rank, seen, lower = 0.99 * len(ttfts), 0, 0.0
    for bound, count in zip(TTFT_BUCKETS, counts, strict=True):
        if seen + count >= rank:
            return lower + (bound - lower) * (rank - seen) / count
        seen, lower = seen + count, bound
    return TTFT_BUCKETS[-1]


def _ttfts(prefill_factor: float, seed: int, seconds: float = 120.0) -> list[float]:
    engine = SimulatedEngine(EngineConfig(arrival_rate=4.0), seed=seed)
    engine.set_load(prefill_factor=prefill_factor)
    engine.advance_to(seconds)
    return [r.first_token - r.arrival for r in engine.finished if r.first_token is not None]


def test_the_canary_build_has_about_twice_the_p99_ttft_of_the_stable_one() -> None:
    # The alert's window at the demo profile (2 min): one canary engine against one stable engine, each
    # with its own seed, five times.
    ratios = [
        _bucket_p99(_ttfts(PREFILL_FACTOR, seed)) / _bucket_p99(_ttfts(1.0, seed + 10)) for seed in range(5)
    ]
    assert all(1.7 < ratio < 2.4 for ratio in ratios), ratios  # over the alert's 1.5, under 2.5


def test_a_prefill_factor_applies_from_the_change_on() -> None:
    engine = SimulatedEngine(EngineConfig(arrival_rate=4.0), seed=3)
    engine.advance_to(60.0)
    before = len(engine.finished)
    assert engine.set_load(prefill_factor=4.0).prefill_factor == 4.0
    with pytest.raises(ValueError, match="prefill_factor must be > 0"):
        EngineConfig(prefill_factor=0.0)
    engine.advance_to(120.0)
    assert before > 0 and len(engine.finished) > before
