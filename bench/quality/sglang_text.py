"""A simulated engine rendered as an SGLang server's /metrics, with SGLang's own latency buckets.

SGLang names its families `sglang:*`, labels them with `model_name` only, and buckets TTFT at 0.1,
0.2, 0.4, 0.6, 0.8, 1, 2, 4, ... seconds: no 0.5 bound. The simulator's engine records latencies in
vLLM's buckets; `use_sglang_buckets` makes it also record its TTFT and e2e latencies in SGLang's, so
the ground truth keeps reading the vLLM buckets while the exporter sees what SGLang would serve.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from servescope.exporter.exposition import escape_label_value
from servescope_sim.engine_stats import Histogram
from servescope_sim.vllm_engine import SimulatedEngine

SGLANG_TTFT_BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0)
SGLANG_E2E_BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0)
LATENCIES = {
    "time_to_first_token_seconds": SGLANG_TTFT_BOUNDS,
    "e2e_request_latency_seconds": SGLANG_E2E_BOUNDS,
}


@dataclass
class TeeHistogram(Histogram):
    """A histogram that records every observation in a second one with other bounds too."""

    also: Histogram | None = None

    def observe(self, value: float, n: int = 1) -> None:
        super().observe(value, n)
        if self.also is not None:
            self.also.observe(value, n)


def use_sglang_buckets(engine: SimulatedEngine) -> None:
    """From now on, the engine also records its latencies in SGLang's buckets."""
    for name, bounds in LATENCIES.items():
        engine.stats.histograms[name] = TeeHistogram(
            engine.stats.histograms[name].bounds, also=Histogram(bounds)
        )


def _sglang_histogram(engine: SimulatedEngine, name: str) -> Histogram:
    histogram = engine.stats.histograms[name]
    if not isinstance(histogram, TeeHistogram) or histogram.also is None:
        raise ValueError(f"engine {engine.engine_id}: call use_sglang_buckets before rendering {name}")
    return histogram.also


class SglangText:
    """Renders one engine's metrics as SGLang's prometheus_client does (text format 0.0.4)."""

    def render(self, engine: SimulatedEngine) -> str:
        labels = f'model_name="{escape_label_value(engine.model_name)}"'
        s = engine.stats
        out = []
        for kind, name, value in (
            ("gauge", "num_running_reqs", engine.num_running),
            ("gauge", "num_queue_reqs", engine.num_waiting),
            ("gauge", "token_usage", engine.kv_cache_usage),
            ("counter", "prompt_tokens_total", s.prompt_tokens),
            ("counter", "generation_tokens_total", s.generation_tokens),
            ("counter", "num_retracted_requests_total", s.preemptions),
        ):
            out.append(f"# TYPE sglang:{name} {kind}\nsglang:{name}{{{labels}}} {_number(value)}\n")
        for name in LATENCIES:
            histogram = _sglang_histogram(engine, name)
            out.append(f"# TYPE sglang:{name} histogram\n")
            out.append(f"sglang:{name}_sum{{{labels}}} {_number(histogram.total)}\n")
            for edge, count in histogram.buckets():
                out.append(f'sglang:{name}_bucket{{le="{edge}",{labels}}} {_number(count)}\n')
            out.append(f"sglang:{name}_count{{{labels}}} {_number(histogram.count)}\n")
        return "".join(out)


def _number(value: float) -> str:
    return floatToGoString(value)  # type: ignore[no-any-return,no-untyped-call]
