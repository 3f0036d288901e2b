"""Replay production: a traffic shape read back from a real Prometheus, replayed against the mock.

The history is an hour of the mock engine's own vLLM-named metrics (1 req/s, then 3 req/s; prompts of
30 or 150 tokens, 2 : 3; outputs of 8), scraped every 15 s into OpenMetrics and imported with promtool.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.quality.openmetrics import SeriesBuffer
from bench.quality.prom import Prometheus, create_blocks
from servescope.kit.load.client import RequestSpec
from servescope.kit.load.replay import (
    Profile,
    PrometheusApi,
    ReplayError,
    draw_lengths,
    read_profile,
    replay_schedule,
    replay_shapes,
)
from servescope.kit.load.runner import HttpStepRunner
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig, MockEngine, metrics_page

HOUR = 3600.0
SCRAPE = 15.0
START = (time.time() // HOUR - 4) * HOUR  # four hours ago, on the hour: inside the TSDB's range


def test_lengths_are_drawn_within_their_buckets() -> None:
    buckets = ((10.0, 40.0), (50.0, 40.0), (200.0, 100.0), (float("inf"), 100.0))
    lengths = draw_lengths(buckets, 5000, random.Random(1))
    assert all(1 <= n <= 10 or 51 <= n <= 200 for n in lengths)
    assert sum(n <= 10 for n in lengths) / len(lengths) == pytest.approx(0.4, abs=0.03)
    assert draw_lengths(((5.0, 0.0), (float("inf"), 3.0)), 3, random.Random(1)) == [6, 6, 6]


def test_a_compressed_replay_keeps_the_shape() -> None:
    profile = Profile(60.0, ((0.0, 1.0), (60.0, 0.0), (120.0, 4.0)), ((10.0, 1.0),), ((10.0, 1.0),))
    times, duration = replay_schedule(profile, compress=6.0, rate_scale=10.0, seed=3)
    assert duration == 30.0
    counts = [sum(lo <= t < lo + 10 for t in times) for lo in (0, 10, 20)]
    assert (
        counts[1] == 0 and counts[0] == pytest.approx(100, abs=35) and counts[2] == pytest.approx(400, abs=70)
    )


def history(work: Path) -> Path:
    """An hour of the mock engine's metrics, as Prometheus would have scraped them, in TSDB blocks."""
    engine = MockEngine(MockConfig(model="prod"))
    buffer = SeriesBuffer("engine:8000", job="vllm")
    done = 0
    for tick in range(1, int(HOUR / SCRAPE) + 1):
        rate = 1.0 if tick * SCRAPE <= HOUR / 2 else 3.0
        for _ in range(round(rate * SCRAPE)):
            engine.finished(30 if done % 5 < 2 else 150, 8, 0.5)
            done += 1
        buffer.add(metrics_page(engine).decode(), START + tick * SCRAPE)
    om = work / "history.om"
    buffer.write(om)
    create_blocks(om, work / "tsdb")
    return work / "tsdb"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusApi]:
    for tool in ("prometheus", "promtool"):
        assert shutil.which(tool), f"{tool} missing (Debian prometheus: scripts/install-debian-tools.sh)"
    with Prometheus(history(tmp_path_factory.mktemp("replay"))) as prom:
        yield PrometheusApi(f"http://127.0.0.1:{prom.port}")


@pytest.mark.e2e
def test_the_profile_read_from_prometheus_is_the_traffic_that_was(prometheus: PrometheusApi) -> None:
    profile = read_profile(prometheus, START, START + HOUR, 60.0, 'model_name="prod"')
    first = [rate for at, rate in profile.curve if at < HOUR / 2 - 180]
    last = [rate for at, rate in profile.curve if at > HOUR / 2 + 180]
    assert statistics.median(first) == pytest.approx(1.0, rel=0.05)
    assert statistics.median(last) == pytest.approx(3.0, rel=0.05)
    prompts = dict(profile.prompt_buckets)
    assert prompts[50.0] / prompts[float("inf")] == pytest.approx(0.4, abs=0.02)
    assert dict(profile.output_buckets)[10.0] == dict(profile.output_buckets)[float("inf")]
    with pytest.raises(ReplayError, match="no series"):
        read_profile(prometheus, START, START + HOUR, 60.0, 'model_name="absent"')


@pytest.mark.e2e
def test_the_replay_runs_as_an_open_loop_load(prometheus: PrometheusApi) -> None:
    profile = read_profile(prometheus, START, START + HOUR, 60.0)
    # The hour in 3 s at five times its rates: 5 req/s, then 15 req/s; about 30 requests.
    times, duration = replay_schedule(profile, compress=1200.0, rate_scale=5.0, seed=7)
    with mock_process(MockConfig(slots=16, ttft_s=0.005, token_s=0.002)) as mock:
        # What is tested here is the shape, not the verdict: the validity rules have their own tests,
        # and a busy machine rightly makes a replay it sent late invalid.
        runner = HttpStepRunner(RequestSpec(mock.base_url, "mock"), replay_shapes(profile, 7))
        result = runner.run_schedule(times, duration, seed=7)
    assert len(result.records) == len(times) and all(r.ok for r in result.records)
    assert sorted(r.scheduled_s for r in result.records) == sorted(times), "the replay's own schedule"
    early = sum(r.scheduled_s < duration / 2 for r in result.records)
    assert len(result.records) - early > 2 * early, "the second half is three times as busy"
    assert {r.output_tokens for r in result.records} <= set(range(6, 11))
    assert all(21 <= r.prompt_tokens <= 50 or 101 <= r.prompt_tokens <= 200 for r in result.records)


REPLAY = [sys.executable, "-m", "servescope", "load", "replay"]


def replay_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REPLAY, *args], capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.e2e
def test_the_replay_command(prometheus: PrometheusApi, tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    hour = ["--start", str(START), "--end", str(START + HOUR), "--compress", "1200", "--rate-scale", "5"]
    with mock_process(MockConfig(slots=16, ttft_s=0.005, token_s=0.002)) as mock:
        done = replay_command(
            "--url",
            mock.base_url,
            "--prometheus",
            prometheus.base_url,
            *hour,
            "--max-lag",
            "1",
            "--json",
            str(out),
        )
    assert done.returncode in (0, 3), done.stderr  # 3: invalid on a busy machine, still reported
    assert done.stdout.startswith("replaying 3600 s of traffic (peak 3.")
    profile = read_profile(prometheus, START, START + HOUR)
    times, _ = replay_schedule(profile, compress=1200, rate_scale=5, seed=0)
    assert json.loads(out.read_text())["requests"] == len(times)


@pytest.mark.e2e
def test_the_replay_command_names_what_it_cannot_replay(prometheus: PrometheusApi) -> None:
    absent = replay_command("--prometheus", prometheus.base_url, "--start", "1", "--end", "1000")
    assert absent.returncode == 1 and "no series" in absent.stderr
    short = replay_command("--start", "10", "--end", "20")
    assert short.returncode == 1 and "at least one positive step" in short.stderr
