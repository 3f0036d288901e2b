"""The derived signals on simulated scenarios, run on a fake clock through the production code paths.

The acceptance tests of the leak detector: a 40 MiB/min leak is estimated within 20% and flagged after
five simulated minutes; a traffic ramp and a steady noisy load are never flagged over an hour.
"""

from __future__ import annotations

import math

import pytest

from servescope.core.catalog import derived as m
from servescope.exporter.exposition import Sample
from servescope_sim.node_harness import simulated_node
from tests.helpers import values

GIB = 1024**3


def _leak_flags(samples: list[Sample]) -> dict[str, float]:
    flags = {}
    for s in samples:
        if s.spec in (m.LEAK_SUSPECTED, m.PROCESS_LEAK_SUSPECTED):
            flags[f"{s.spec.name}{s.label_values}"] = s.value
    return flags


def test_leak_is_flagged_and_time_to_exhaustion_estimated_after_five_minutes() -> None:
    node = simulated_node("memory-leak", gpus=2, engines=1)
    samples = node.run(300)
    estimate = values(samples, m.MEMORY_EXHAUSTION.name, gpu="0", window="5m")
    truth = node.fleet.true_seconds_to_exhaustion(0)
    assert math.isfinite(truth)
    assert estimate, "no 5m exhaustion estimate after 5 minutes"
    assert estimate[0] == pytest.approx(truth, rel=0.20)
    assert values(samples, m.LEAK_SUSPECTED.name, gpu="0") == [1]
    assert values(samples, m.PROCESS_LEAK_SUSPECTED.name, gpu="0") == [1]
    # The healthy GPU beside it: no leak, and no exhaustion in sight.
    assert values(samples, m.LEAK_SUSPECTED.name, gpu="1") == [0]
    growth = values(samples, m.MEMORY_GROWTH.name, gpu="0", window="5m")[0]
    assert growth == pytest.approx(40 * 1024**2 / 60, rel=0.20)
    # The leaked bytes sit outside the engine's budget: GPU 0 is over by what leaked, GPU 1 is not.
    over = {gpu: values(samples, m.MEMORY_OVER_BUDGET.name, gpu=gpu)[0] for gpu in ("0", "1")}
    leaked = node.fleet.gpus[0].leaked
    assert over["0"] - over["1"] == pytest.approx(leaked, abs=256 * 1024**2)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["traffic-ramp", "steady"])
def test_no_leak_over_an_hour_of_ramp_or_steady_noisy_load(scenario: str) -> None:
    node = simulated_node(scenario, gpus=2, engines=1)
    flagged: list[tuple[float, str]] = []
    for _ in range(3600 // 60):
        samples = node.run(60)
        flagged += [(node.elapsed, k) for k, v in _leak_flags(samples).items() if v]
        assert _leak_flags(samples), "leak series missing"
    assert flagged == []
    if scenario == "traffic-ramp":
        # Memory did grow, a lot: the detector saw growth and blamed the traffic, correctly.
        growth = values(samples, m.MEMORY_GROWTH.name, gpu="0", window="30m")[0]
        assert growth > 1024**2 / 60
        reason = node.derived.trend(node.history.find_gpu("0"), node.clock.now).verdict.reason  # type: ignore[arg-type]
        assert "load changed" in reason


def test_two_second_spike_between_scrapes_shows_in_the_peak() -> None:
    node = simulated_node("steady", gpus=1, engines=0)
    node.run(120)  # a Prometheus scrape happens here...
    base = values(node.run(10), m.MEMORY_PEAK.name, gpu="0")[0]
    node.fleet.spike(0, 4 * GIB, 2.0)
    node.run(3)
    samples = node.run(17)  # ...and the next one 30 s later, long after the spike ended
    used_now = node.fleet.gpus[0].used_bytes - node.fleet.gpus[0].model.reserved_bytes
    peak = values(samples, m.MEMORY_PEAK.name, gpu="0")[0]
    assert peak >= base + 3.5 * GIB
    assert used_now < base + GIB  # the plain gauge at that scrape shows nothing
    assert values(samples, m.MEMORY_MIN.name, gpu="0")[0] < base + GIB


def test_kv_pressure_shows_shrinking_headroom_and_a_saturation_time() -> None:
    node = simulated_node("kv-pressure", gpus=1, engines=1)
    early = values(node.run(300), m.KV_FREE_TOKENS.name)[0]
    samples = node.run(600)
    late = values(samples, m.KV_FREE_TOKENS.name)[0]
    assert late < early
    saturation = values(samples, m.KV_SATURATION.name)[0]
    assert 0 < saturation < math.inf
    assert values(samples, m.KV_FREE_REQUESTS.name)[0] == pytest.approx(late / 8192)
