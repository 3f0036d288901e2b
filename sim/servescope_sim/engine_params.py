"""How the simulated engine answers to vLLM's serving flags: step cost, KV capacity and start failure.

The factors below are applied by `engine_config.effective`. The defaults (16-bit weights,
`kv_cache_dtype=auto`, `gpu_memory_utilization=0.9`, `max_num_batched_tokens=8192`) are the engine of
engine_config.py unchanged. Each flag moves one term:

- `max_num_seqs` caps the running batch. Step time grows with the batch (engine_config.py): batch 1 -> 8
  gives 3.39x tokens/s and +137 % per-token latency; past the knee a larger cap only lengthens the tail.
- `quantization` (`fp8`, `int8`) shrinks the weights a step reads: the weight terms (`base`, `experts`)
  take 0.62x (fp8) or 0.68x (int8) as long, prefill compute 0.70x / 0.80x, and the weights hold 0.29 of
  the device instead of 0.55, which leaves the KV pool 1.9x larger. `dtype` `bfloat16`/`float16`/`auto`
  are the 16-bit baseline. Output quality is not modelled.
- `kv_cache_dtype=fp8` halves the bytes per cached token: twice the KV blocks, and attention reads
  0.6x as long (half the bytes plus the dequantisation).
- `gpu_memory_utilization` sizes the pool: KV = utilisation - weights - activations, where activations
  take 0.02 + 0.03 x max_num_batched_tokens / 8192 of the device. The driver and CUDA context hold 4 %,
  so asking for more than 0.96 fails at start, as vLLM does when free memory is short; a pool that
  leaves no room for the KV cache fails too (sequences longer than the pool are capped, as before).
- `max_num_batched_tokens` bounds the prefill tokens of a step (and the activation memory above).
- `enable_chunked_prefill` (vllm_engine.py) splits a prompt that does not fit the step's token budget
  instead of leaving the rest of the budget unused: prefill throughput holds under mixed prompt lengths,
  so the TTFT tail near capacity is lower.
- `enable_prefix_caching=False` computes every prompt token (no prefix-cache hits).
- `scheduling_policy=priority` admits the shortest waiting prompt first (clients set priority = prompt
  length, a shortest-job-first policy): short requests stop queueing behind long prefills.
"""

from __future__ import annotations

from dataclasses import dataclass

from servescope.core.errors import ServescopeError

RESERVED_SHARE = 0.04  # driver, firmware and CUDA context: never available to vLLM
WEIGHT_SHARE = {None: 0.55, "fp8": 0.29, "int8": 0.29}
WEIGHT_READ = {None: 1.0, "fp8": 0.62, "int8": 0.68}
PREFILL_COMPUTE = {None: 1.0, "fp8": 0.70, "int8": 0.80}
KV_BLOCKS = {"auto": 1.0, "fp8": 2.0}
KV_READ = {"auto": 1.0, "fp8": 0.6}
DTYPES = ("auto", "bfloat16", "float16")
POLICIES = ("fcfs", "priority")
ARRIVALS = ("poisson", "constant")


class EngineStartError(ServescopeError, RuntimeError):
    """The engine refuses to start with these flags (memory), as vLLM exits at start."""


@dataclass(frozen=True, slots=True)
class Effective:
    """What the flags make of the configured engine: step-cost factors and KV blocks."""

    weight_read: float
    kv_read: float
    prefill_compute: float
    num_gpu_blocks: int


def kv_pool_share(
    gpu_memory_utilization: float, quantization: str | None, max_num_batched_tokens: int
) -> float:
    """The device share left for the KV cache under these flags."""
    activations = 0.02 + 0.03 * max_num_batched_tokens / 8192
    return gpu_memory_utilization - WEIGHT_SHARE[quantization] - activations


BASELINE_POOL = kv_pool_share(0.9, None, 8192)
