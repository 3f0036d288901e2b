"""The alert-quality benchmark's ground truth and the inputs it gives the tools (promtool, Prometheus)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.quality.fleet_library import library as fleet_library
from bench.quality.library import library
from bench.quality.node import Truth
from bench.quality.openmetrics import SeriesBuffer, StepBuffer, names_read_by
from bench.quality.scenarios import Busy, During, SloBreach
from bench.quality.truth import Recorded, intersect, resolve, smoothed, sustained
from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.alerts.bundle import all_alerts
from servescope.core.config import AlertsConfig

RULES = ALERTS_BUILD / "rules.yaml"

# --- ground truth -------------------------------------------------------------------------------------


def test_sustained_intervals_keep_only_those_as_long_as_asked() -> None:
    times = [5.0 * i for i in range(1, 13)]  # 5 .. 60
    flags = [False, True, True, False, True, True, True, True, True, False, False, True]
    assert sustained(times, flags, 0) == [(10, 20), (25, 50), (60, 60)]
    assert sustained(times, flags, 20) == [(25, 50)]
    assert smoothed([0, 30, 60, 90], [1.0, None, 1.0, 1.0], 60) == [1.0, 0.5, 0.5, 1.0]
    assert intersect([(0, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]


def test_busy_and_fixed_windows_resolve_against_the_recorded_truth() -> None:
    truth = Truth(times=[60.0 * i for i in range(1, 31)])
    # GPU 0 above 0.85 from minute 5 to minute 20; GPU 1 never; GPU 1 lost at minute 25.
    truth.gpu_busy = [[0.95 if 5 <= i < 20 else 0.5, None if i >= 25 else 0.5] for i in range(1, 31)]
    recorded = Recorded(truth, {}, 1800.0)
    assert resolve(Busy(0.85, 600, 0), recorded) == [(300, 1200)]
    assert resolve(Busy(0.85, 1200, 0), recorded) == []
    assert resolve(Busy(0.7, 0), recorded) == [(300, 1200)]  # the mean of 0.95 and 0.5
    assert resolve(During(600, math.inf), recorded) == [(600, 1800)]


def test_slo_breach_counts_the_requests_over_the_bound_across_engines_and_restarts() -> None:
    # Two engines, buckets le=0.5 / le=+Inf; cumulative counts since each engine started, every minute.
    truth = Truth(times=[60.0, 120.0, 180.0, 240.0, 300.0], bounds={"ttft": (0.5,)})
    truth.latency["ttft"] = [
        [(10, 0), (10, 0)],
        [(20, 0), (20, 1)],  # 1 slow request of 21 this minute: 4.8 %
        [(30, 0), None],  # engine 1 down
        [(40, 0), (5, 5)],  # engine 1 restarted: 10 new requests, 5 slow
        [(50, 0), (15, 5)],  # no slow request this minute
    ]
    recorded = Recorded(truth, {}, 300.0)
    # Over 1-minute windows: breached in the minutes that had slow requests.
    assert resolve(SloBreach("ttft", 0.5, 60, 0.01), recorded) == [(120, 180), (240, 300)]
    # Over 3 minutes: 1 of 41 (2.4 %) at 120 s, 1 of 51 at 180 s, 6 of 51 (11.8 %) at 240 s, 5 of 50 at 300 s.
    assert resolve(SloBreach("ttft", 0.5, 180, 0.01), recorded) == [(120, 300)]
    assert resolve(SloBreach("ttft", 0.5, 180, 0.05), recorded) == [(240, 300)]
    assert resolve(SloBreach("ttft", 0.5, 180, 0.12), recorded) == []
    with pytest.raises(ValueError, match="not a bucket bound"):
        resolve(SloBreach("ttft", 0.4, 60, 0.01), recorded)


# --- the tools' inputs --------------------------------------------------------------------------------


def test_every_alert_the_libraries_name_exists_in_the_rules() -> None:
    """A renamed alert must not leave an incident expecting nothing that exists."""
    names = {a.name for a in all_alerts(AlertsConfig())}
    named = {a for plan in library() for i in plan.incidents for a in (*i.expect, *i.accept)}
    named |= {a for plan in fleet_library() for i in plan.incidents for a in (*i.expect, *i.accept)}
    assert named <= names, named - names


def test_scrapes_become_promtool_series_with_gaps_staleness_and_up() -> None:
    buffer = StepBuffer("run/seed1")
    buffer.add('# HELP servescope_a a\nservescope_a{gpu="0"} 2\nservescope_b 1e-05\n', 1)
    buffer.add('servescope_a{gpu="0"} 3\n', 2)
    buffer.add_failed(3)
    buffer.add('servescope_a{gpu="0"} 3\n', 4)
    target = 'instance="run/seed1",job="servescope"'
    assert buffer.input_series() == [
        {"series": f'servescope_a{{{target},gpu="0"}}', "values": "_ 2 3 stale 3"},
        {"series": f"servescope_b{{{target}}}", "values": "_ 1e-05 stale _x2"},
        {"series": f"up{{{target}}}", "values": "_ 1x1 0 1"},
    ]


def test_scrapes_become_openmetrics_with_target_labels_timestamps_and_one_block_per_name() -> None:
    buffer = SeriesBuffer("run/seed1", keep=names_read_by(["servescope_a > 1", "rate(servescope_b[5m])"]))
    scrape = '# HELP servescope_a a\nservescope_a{gpu="0"} 2\nservescope_b 1e-05\nservescope_c 7\n'
    buffer.add(scrape, 100.0)
    buffer.add(scrape.replace(" 2\n", " 3\n"), 130.0)
    target = 'instance="run/seed1",job="servescope"'
    out = Path(__file__).parent / "om.tmp"
    try:
        buffer.write(out)
        assert out.read_text() == (
            f'servescope_a{{{target},gpu="0"}} 2 100.000\n'
            f'servescope_a{{{target},gpu="0"}} 3 130.000\n'
            f"servescope_b{{{target}}} 1e-05 100.000\n"
            f"servescope_b{{{target}}} 1e-05 130.000\n"
            f"up{{{target}}} 1 100.000\n"
            f"up{{{target}}} 1 130.000\n"
            "# EOF\n"
        )
    finally:
        out.unlink(missing_ok=True)
