"""What a simulated vLLM engine records: request counters and the histograms vLLM keeps, with vLLM's
own bucket layouts (shown by `vllm_metrics.py`)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from servescope_sim.engine_model import Request


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(word) for word in text.split())


# Bucket boundaries exactly as vLLM's metrics logger declares them.
TTFT_BUCKETS = _floats(
    "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560"
)
TOKEN_LATENCY_BUCKETS = _floats("0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5 10 20 40 80")
REQUEST_SECONDS_BUCKETS = _floats("0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680")
ITERATION_TOKEN_BUCKETS = _floats("1 8 16 32 64 128 256 512 1024 2048 4096 8192 16384")
PREEMPTION_BUCKETS = _floats("1 2 3 4 5 10 20")
PARAMS_N_BUCKETS = _floats("1 2 5 10 20")


def one_two_five(limit: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to `limit`: vLLM's buckets for per-request token counts."""
    found: list[float] = []
    exponent = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * exponent
            if value > limit:
                return tuple(found)
            found.append(float(value))
        exponent *= 10


@dataclass(slots=True)
class Histogram:
    """Cumulative-on-read histogram with Prometheus `le` semantics."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, n: int = 1) -> None:
        if n:
            self.counts[bisect_left(self.bounds, value)] += n
            self.total += value * n

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        edges = [repr(float(b)) for b in self.bounds] + ["+Inf"]
        running, out = 0, []
        for edge, n in zip(edges, self.counts, strict=True):
            running += n
            out.append((edge, float(running)))
        return out


@dataclass(slots=True)
class EngineStats:
    """Counters and histograms since the engine process started; `created` is that Unix time."""

    created: float
    histograms: dict[str, Histogram]
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    finished: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("stop", "length", "abort", "error", "repetition"), 0)
    )

    @classmethod
    def new(cls, *, created: float, max_model_len: int) -> EngineStats:
        tokens = one_two_five(max_model_len)
        bounds = {
            "time_to_first_token_seconds": TTFT_BUCKETS,
            "inter_token_latency_seconds": TOKEN_LATENCY_BUCKETS,
            "request_time_per_output_token_seconds": TOKEN_LATENCY_BUCKETS,
            "iteration_tokens_total": ITERATION_TOKEN_BUCKETS,
            "request_num_preemptions": PREEMPTION_BUCKETS,
            "request_params_n": PARAMS_N_BUCKETS,
        }
        for name in ("e2e_request_latency", "request_queue_time", "request_inference_time"):
            bounds[f"{name}_seconds"] = REQUEST_SECONDS_BUCKETS
        for name in ("request_prefill_time", "request_decode_time"):
            bounds[f"{name}_seconds"] = REQUEST_SECONDS_BUCKETS
        for name in ("prompt", "generation", "max_num_generation", "params_max", "prefill_kv_computed"):
            bounds[f"request_{name}_tokens"] = tokens
        return cls(created, {name: Histogram(b) for name, b in bounds.items()})

    def observe(self, name: str, value: float, n: int = 1) -> None:
        self.histograms[name].observe(value, n)

    def observe_finished(
        self,
        reason: str,
        *,
        e2e: float,
        queue: float,
        prefill: float,
        decode: float,
        inference: float,
        prompt: int,
        cached: int,
        generated: int,
        max_tokens: int,
        preemptions: int,
    ) -> None:
        """Record a finished request the way vLLM's output processor does."""
        self.finished[reason] += 1
        per_token = decode / (generated - 1) if generated > 1 else 0.0
        for name, value in (
            ("e2e_request_latency_seconds", e2e),
            ("request_queue_time_seconds", queue),
            ("request_prefill_time_seconds", prefill),
            ("request_decode_time_seconds", decode),
            ("request_inference_time_seconds", inference),
            ("request_time_per_output_token_seconds", per_token),
            ("request_prompt_tokens", prompt),
            ("request_generation_tokens", generated),
            ("request_max_num_generation_tokens", generated),  # n = 1: the longest of one sequence
            ("request_params_n", 1),
            ("request_params_max_tokens", max_tokens),
            ("request_num_preemptions", preemptions),
            ("request_prefill_kv_computed_tokens", prompt - cached),
        ):
            self.histograms[name].observe(value)


def record_finished(stats: EngineStats, req: Request, reason: str, now: float) -> None:
    """Record `req`, finished at `now` for `reason`, with the phase times vLLM derives."""
    scheduled = req.scheduled_at if req.scheduled_at is not None else now
    first = req.first_token_at if req.first_token_at is not None else scheduled
    last = max(req.last_token_at, first)
    stats.observe_finished(
        reason,
        e2e=now - req.arrival,
        queue=scheduled - req.arrival,
        prefill=first - scheduled,
        decode=last - first,
        inference=last - scheduled,
        prompt=req.prompt,
        cached=req.cached,
        generated=req.generated,
        max_tokens=req.max_tokens,
        preemptions=req.preemptions,
    )
