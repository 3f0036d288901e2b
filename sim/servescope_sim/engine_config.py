"""The simulated engine's configuration: load and capacity, the time an engine step takes, and what
the serving flags make of them (`effective`). Requests and steps in flight: engine_model.py.

Step time, for the DeepSeek-class MoE of the seed guide (batch 1 -> 8: 3.2x throughput, +120% P99):

    step = base + experts * (1 - (1 - top_k / num_experts) ** batch)
           + kv_per_1k_context * context_tokens / 1024 + prefill_per_token * prefill_tokens

`base` is what every step pays (dense and shared-expert weights, launches). The experts term is the
routed-expert weight a step must read: each sequence routes to its own top-k of 256, so 1 sequence reads
8 experts and 8 read ~57 (the guide's KV-bandwidth and SM contention play that part on dense models).
The KV term is attention reading every cached token of every running sequence, the last one prefill
compute. With 512/128-token requests a step takes 10.8 ms at batch 1 and 25.6 ms at batch 8, so tokens/s
rise 8 x 10.8 / 25.6 = 3.4x and latency 25.6 / 10.8 = +137%. A full batch obeys Little's law (throughput
x latency rises by the batch ratio, 8), so the operators' 3.2x and +120% (product 7.0) cannot both hold
exactly; the constants sit in between. Larger batches keep gaining throughput, slowly (~750 tokens/s at
64, ~1660 at 256) while each token takes longer (85 ms, 154 ms).

How quantization, the KV cache dtype, memory utilisation, chunked prefill, prefix caching and the
scheduling policy change these terms: engine_params.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from servescope_sim.engine_params import (
    ARRIVALS,
    BASELINE_POOL,
    DTYPES,
    KV_BLOCKS,
    KV_READ,
    POLICIES,
    PREFILL_COMPUTE,
    RESERVED_SHARE,
    WEIGHT_READ,
    WEIGHT_SHARE,
    Effective,
    EngineStartError,
    kv_pool_share,
)


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds per engine step, from the batch, the tokens it reads and the tokens it prefills."""

    base: float = 0.0085  # s: a step's cost before its experts, context and prefill
    experts: float = 0.065  # s: reading the weights of every expert once
    top_k: int = 8  # experts a token is routed to
    num_experts: int = 256  # experts of the model: a batch reads 1 - (1 - top_k/num_experts)^batch of them
    kv_per_1k_context: float = 0.0004  # s per 1,024 tokens of context the batch reads
    prefill_per_token: float = 0.00003  # s per prompt token prefilled in the step

    def seconds(self, batch: int, context_tokens: int, prefill_tokens: int) -> float:
        coverage = 1.0 - (1.0 - self.top_k / self.num_experts) ** batch
        return (
            self.base
            + self.experts * coverage
            + self.kv_per_1k_context * context_tokens / 1024
            + self.prefill_per_token * prefill_tokens
        )

    def scaled(self, flags: Effective, prefill_factor: float = 1.0) -> StepCost:
        """This cost under quantization and KV-cache dtype factors (engine_params.py), and a build's own
        prefill factor."""
        if (flags.weight_read, flags.kv_read, flags.prefill_compute * prefill_factor) == (1.0, 1.0, 1.0):
            return self
        return replace(
            self,
            base=self.base * flags.weight_read,
            experts=self.experts * flags.weight_read,
            kv_per_1k_context=self.kv_per_1k_context * flags.kv_read,
            prefill_per_token=self.prefill_per_token * flags.prefill_compute * prefill_factor,
        )


_MINIMUMS = {"arrival_rate": 0, "concurrency": 0, "max_num_seqs": 1, "prompt_tokens": 1, "output_tokens": 1}
_MINIMUMS |= {"block_size": 1, "num_gpu_blocks": 1, "max_model_len": 2}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Load and capacity; load fields change at run time through `SimulatedEngine.set_load`."""

    arrival_rate: float = 1.0  # Poisson arrivals, requests per second
    concurrency: int = 0  # closed-loop clients that send a new request when theirs finishes
    max_num_seqs: int = 256
    prompt_tokens: int = 512  # mean of a log-normal prompt length
    output_tokens: int = 128  # mean of a log-normal natural output length
    prompt_sigma: float = 0.6
    output_sigma: float = 0.5
    max_tokens_factor: float = 2.0  # clients ask for max_tokens = factor x output_tokens
    prefix_hit_fraction: float = 0.3  # mean share of a prompt found in the prefix cache
    abort_fraction: float = 0.0  # share of requests their client aborts half way
    block_size: int = 16
    num_gpu_blocks: int = 65_536  # x block_size = 1,048,576 tokens, an H200's KV budget
    max_model_len: int = 8192
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    cost: StepCost = field(default_factory=StepCost)
    # vLLM's serving flags beyond the batch limits (engine_params.py); the defaults are vLLM's own.
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    enable_chunked_prefill: bool = False
    enable_prefix_caching: bool = True
    scheduling_policy: str = "fcfs"
    arrival_pattern: str = "poisson"  # or "constant": one request every 1 / arrival_rate seconds
    # A build whose prefill is this many times slower (a slower attention kernel): the canary scenario.
    prefill_factor: float = 1.0

    def __post_init__(self) -> None:
        problems = []
        for name, low in _MINIMUMS.items():
            if getattr(self, name) < low:
                problems.append(f"{name} must be >= {low}, got {getattr(self, name)}")
        if not math.isfinite(self.arrival_rate):
            problems.append(f"arrival_rate must be finite, got {self.arrival_rate}")
        if not 0 < self.prefill_factor < math.inf:
            problems.append(f"prefill_factor must be > 0, got {self.prefill_factor}")
        for name in ("prefix_hit_fraction", "abort_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} must be between 0 and 1, got {getattr(self, name)}")
        problems += _check_flags(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def context_limit(self) -> int:
        """Longest sequence: vLLM refuses to start when max_model_len does not fit in the KV cache."""
        return min(self.max_model_len, self.block_size * self.num_gpu_blocks)

    @property
    def max_tokens(self) -> int:
        return max(1, round(self.output_tokens * self.max_tokens_factor))

    def blocks_for(self, tokens: int) -> int:
        """KV blocks that hold `tokens` tokens."""
        return -(-tokens // self.block_size)


def _check_flags(config: EngineConfig) -> list[str]:
    """Problems with the flag values themselves (not memory), each naming the flag."""
    problems = []
    choices: tuple[tuple[str, object, tuple[object, ...]], ...] = (
        ("quantization", config.quantization, tuple(WEIGHT_SHARE)),
        ("kv_cache_dtype", config.kv_cache_dtype, tuple(KV_BLOCKS)),
        ("dtype", config.dtype, DTYPES),
        ("scheduling_policy", config.scheduling_policy, POLICIES),
        ("arrival_pattern", config.arrival_pattern, ARRIVALS),
    )
    for name, value, allowed in choices:
        if value not in allowed:
            problems.append(f"{name} must be one of {allowed}, got {value!r}")
    if not 0 < config.gpu_memory_utilization <= 1:
        problems.append(f"gpu_memory_utilization must be in (0, 1], got {config.gpu_memory_utilization}")
    return problems


def effective(config: EngineConfig) -> Effective:
    """The step-cost factors and KV blocks of `config`; raises EngineStartError where vLLM would not start."""
    if config.gpu_memory_utilization > 1 - RESERVED_SHARE:
        raise EngineStartError(
            f"gpu_memory_utilization {config.gpu_memory_utilization} asks for more than the "
            f"{1 - RESERVED_SHARE:.2f} of device memory free at start"
        )
    pool = kv_pool_share(config.gpu_memory_utilization, config.quantization, config.max_num_batched_tokens)
    if pool <= 0:
        raise EngineStartError(
            f"gpu_memory_utilization {config.gpu_memory_utilization} leaves no memory for the KV cache"
        )
    blocks = round(config.num_gpu_blocks * pool / BASELINE_POOL * KV_BLOCKS[config.kv_cache_dtype])
    return Effective(
        WEIGHT_READ[config.quantization],
        KV_READ[config.kv_cache_dtype],
        PREFILL_COMPUTE[config.quantization],
        blocks,
    )
