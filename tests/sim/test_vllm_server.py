"""The simulated vLLM server: its exposition against real vLLM samples, its HTTP API, its process."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from servescope_sim.engine_stats import one_two_five
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import CONTENT_TYPE, Generation, render_metrics
from servescope_sim.vllm_server import create_app, main
from tests.helpers import SAMPLES, FakeClock

CURRENT_SAMPLE = SAMPLES / "vllm-0.32-cpu-idle.txt"
LEGACY_SAMPLE = SAMPLES / "vllm-0.10-full.txt"
# Families of the real 0.32 exposition the simulator leaves out on purpose (see vllm_metrics).
NOT_SIMULATED = {
    "vllm:estimated_flops_per_gpu",
    "vllm:estimated_read_bytes_per_gpu",
    "vllm:estimated_write_bytes_per_gpu",
    "vllm:admission_rejections",
}
# 0.10 served both generations; the names that 0.8/0.9 did not have yet.
NEWER_THAN_LEGACY = {"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits"}


def busy_engine(seed: int = 1) -> SimulatedEngine:
    engine = SimulatedEngine(EngineConfig(arrival_rate=3.0, num_gpu_blocks=4096), seed=seed, model_name="m")
    engine.advance_to(120.0)
    return engine


def vllm_families(text: str) -> dict[str, str]:
    """Family name -> type, for the vllm: families of an exposition."""
    families = text_string_to_metric_families(text)
    return {f.name: f.type for f in families if f.name.startswith("vllm:")}


def bucket_bounds(text: str) -> dict[str, list[str]]:
    bounds: dict[str, list[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name.startswith("vllm:") and sample.name.endswith("_bucket"):
                bounds.setdefault(family.name, []).append(sample.labels["le"])
    return bounds


def with_created(names: set[str]) -> set[str]:
    return names | {f"{name}_created" for name in names}


# --- exposition -------------------------------------------------------------------------------------
def test_current_families_are_the_real_0_32_ones_less_the_unsimulated() -> None:
    ours = vllm_families(render_metrics(busy_engine()))
    real = vllm_families(CURRENT_SAMPLE.read_text())

    assert set(real) - set(ours) == with_created(NOT_SIMULATED)
    assert set(ours) <= set(real)  # nothing invented
    assert len(ours) >= 60
    assert {name: real[name] for name in ours} == ours  # same types


def test_legacy_families_are_the_0_8_era_names() -> None:
    ours = vllm_families(render_metrics(busy_engine(), "legacy"))
    real = vllm_families(LEGACY_SAMPLE.read_text())

    assert set(ours) == set(real) - with_created(NEWER_THAN_LEGACY)
    for old in (
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries",
        "vllm:time_per_output_token_seconds",
    ):
        assert old in ours
    current = vllm_families(render_metrics(busy_engine(), "current"))
    assert not {
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_hits",
        "vllm:time_per_output_token_seconds",
    } & set(current)
    assert not with_created(NEWER_THAN_LEGACY | {"vllm:inter_token_latency_seconds"}) & set(ours)


def test_histogram_buckets_are_vllms() -> None:
    engine = busy_engine()
    ours = bucket_bounds(render_metrics(engine))
    real = bucket_bounds(CURRENT_SAMPLE.read_text())
    token_counts = {
        name for name in real if name.endswith("_tokens") and name != "vllm:iteration_tokens_total"
    }

    for name in set(real) - token_counts:
        assert ours[name] == real[name], name
    # Per-request token buckets run 1-2-5 up to max_model_len: 200 on the tiny model, 8192 here.
    for name in token_counts:
        assert ours[name][: len(real[name]) - 1] == real[name][:-1], name
        assert ours[name][:-1] == [repr(b) for b in one_two_five(engine.config.max_model_len)]
    legacy_real = bucket_bounds(LEGACY_SAMPLE.read_text())  # a model with max_model_len >= 5000
    assert bucket_bounds(render_metrics(engine, "legacy")) == legacy_real


def test_every_series_has_engine_and_model_name_and_cache_config_says_the_capacity() -> None:
    text = render_metrics(busy_engine())
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    assert all(s.labels["engine"] == "0" and s.labels["model_name"] == "m" for s in samples)
    (info,) = [s for s in samples if s.name == "vllm:cache_config_info"]
    assert info.value == 1.0
    assert info.labels["block_size"] == "16" and info.labels["num_gpu_blocks"] == "4096"
    assert info.labels["gpu_memory_utilization"] == "0.9" and info.labels["cache_dtype"] == "auto"
    assert info.labels["enable_prefix_caching"] == "True" and info.labels["kv_cache_size_tokens"] == "65536"


def test_counters_carry_total_and_created_like_vllm() -> None:
    text = render_metrics(busy_engine())
    assert "# TYPE vllm:generation_tokens_total counter\n" in text
    assert re.search(r'^vllm:generation_tokens_total\{engine="0",model_name="m"\} \d+\.0$', text, re.M)
    assert re.search(r'^vllm:generation_tokens_created\{engine="0",model_name="m"\} 1\.7e\+09$', text, re.M)
    assert "# TYPE vllm:iteration_tokens_total histogram\n" in text
    assert 'vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="m"}' in text


def test_an_unknown_generation_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown generation 'v0'; expected one of current, legacy"):
        render_metrics(busy_engine(), "v0")  # type: ignore[arg-type]


def promtool_problems(text: str) -> tuple[int, set[str]]:
    """promtool's exit code and its complaints with the metric names taken out."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: `make test` installs Debian's prometheus package")
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    lines = (done.stdout + done.stderr).splitlines()
    return done.returncode, {line.split(" ", 1)[1] if line.startswith("vllm:") else line for line in lines}


@pytest.mark.e2e
@pytest.mark.parametrize("generation", ["current", "legacy"])
def test_promtool_finds_nothing_a_real_vllm_does_not_trigger(generation: Generation) -> None:
    _, real = promtool_problems(CURRENT_SAMPLE.read_text())
    # The real server's own: `vllm:` names and the histogram vllm:iteration_tokens_total.
    assert real == {
        "metric names should not contain ':'",
        'non-counter metrics should not have "_total" suffix',
    }
    code, ours = promtool_problems(render_metrics(busy_engine(), generation))
    assert code in (0, 3)  # 3: lint findings only, no parse error
    assert ours == real


# --- HTTP API -------------------------------------------------------------------------------------
class Http:
    """Requests to the app in-process; no server, so no background ticker: every route catches up itself."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def request(self, method: str, path: str, json: object = None) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
                return await http.request(method, path, json=json)

        return asyncio.run(send())

    def get(self, path: str) -> httpx.Response:
        return self.request("GET", path)

    def post(self, path: str, json: object) -> httpx.Response:
        return self.request("POST", path, json)


@pytest.fixture
def client() -> tuple[Http, SimulatedEngine, FakeClock]:
    clock = FakeClock(start=0.0)
    engine = SimulatedEngine(EngineConfig(arrival_rate=2.0), seed=3, model_name="m", engine_id="1")
    return Http(create_app(engine, "current", clock)), engine, clock


def test_metrics_advance_the_engine_to_now(client: tuple[Http, SimulatedEngine, FakeClock]) -> None:
    http, engine, clock = client
    clock.advance(60.0)
    response = http.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE
    assert engine.now == 60.0
    assert 'vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"}' in response.text
    assert http.get("/health").status_code == 200
    assert http.get("/v1/models").json()["data"][0]["id"] == "m"


def test_control_changes_load_and_takes_the_engine_down_and_up(
    client: tuple[Http, SimulatedEngine, FakeClock],
) -> None:
    http, engine, clock = client
    clock.advance(30.0)
    changed = http.post("/control", json={"arrival_rate": 5.5, "max_num_seqs": 32, "output_tokens": 64})
    assert changed.status_code == 200
    assert changed.json() == {
        "arrival_rate": 5.5,
        "max_num_seqs": 32,
        "prompt_tokens": 512,
        "output_tokens": 64,
        "concurrency": 0,
        "prefill_factor": 1.0,
        "down": False,
    }
    assert engine.now == 30.0 and engine.config.max_num_seqs == 32
    assert http.post("/control", json={"down": True}).json()["down"] is True
    assert http.get("/metrics").status_code == 503
    assert http.get("/health").status_code == 503
    clock.advance(10.0)
    assert http.post("/control", json={"down": False}).status_code == 200
    assert http.get("/health").status_code == 200
    assert http.get("/metrics").status_code == 200
    assert engine.stats.created == engine.wall(40.0)  # restarted


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"arrival_rate": -1}, "arrival_rate: Input should be greater than or equal to 0"),
        ({"max_num_seqs": "many"}, "max_num_seqs: Input should be a valid integer"),
        ({"speed": 2}, "speed: Extra inputs are not permitted"),
        ([1, 2], "body (a JSON object): Input should be a valid dictionary"),
    ],
)
def test_control_rejects_bad_input_with_a_clear_message(
    client: tuple[Http, SimulatedEngine, FakeClock], body: object, message: str
) -> None:
    http, engine, _ = client
    response = http.post("/control", json=body)
    assert response.status_code == 422
    assert message in response.json()["error"]
    assert engine.config.arrival_rate == 2.0


# --- the process ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--listen", "nowhere"], "invalid listen address 'nowhere': expected HOST:PORT"),
        (["--max-num-seqs", "0"], "max_num_seqs must be >= 1, got 0"),
        (["--generation", "v0"], "invalid choice: 'v0'"),
    ],
)
def test_bad_options_exit_2_with_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


@pytest.mark.e2e
def test_the_server_process_serves_obeys_control_and_stops_on_sigterm() -> None:
    # The with block closes the pipes: an unclosed pipe is a ResourceWarning, and warnings fail tests.
    with subprocess.Popen(
        [sys.executable, "-m", "servescope_sim.vllm_server", "--listen", "127.0.0.1:0", "--seed", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            found = re.fullmatch(r"sim-vllm serving on 127\.0\.0\.1:(\d+)\n", first)
            assert found, first
            base = f"http://127.0.0.1:{found.group(1)}"
            metrics = httpx.get(f"{base}/metrics", timeout=5)
            assert metrics.status_code == 200 and "vllm:num_requests_running{" in metrics.text
            assert httpx.get(f"{base}/health", timeout=5).status_code == 200
            changed = httpx.post(f"{base}/control", json={"arrival_rate": 7.0}, timeout=5)
            assert changed.json()["arrival_rate"] == 7.0
            assert httpx.post(f"{base}/control", json={"down": True}, timeout=5).status_code == 200
            assert httpx.get(f"{base}/metrics", timeout=5).status_code == 503
            assert httpx.get(f"{base}/health", timeout=5).status_code == 503
            assert httpx.post(f"{base}/control", json={"down": False}, timeout=5).status_code == 200
            assert httpx.get(f"{base}/health", timeout=5).status_code == 200
        finally:
            process.terminate()
            code = process.wait(30)
    # uvicorn shuts down gracefully, then re-raises the signal: "terminated by SIGTERM" is a clean exit.
    assert code in (0, -15)
