"""vLLM V1's flag semantics, so that a search space holds no flag that cannot take effect.

- `max_num_batched_tokens` is V1's token budget of every step, prefill and decode alike, whether chunked
  prefill is on or not: a space that makes it conditional on `enable_chunked_prefill` describes the V0
  scheduler, and is refused.
- With chunked prefill off, a prompt must fit one step's budget: `max_num_batched_tokens` below
  `max_model_len` cannot start. Such a configuration is an infeasible trial before any engine starts.
- `scheduling_policy=priority` orders requests by the `priority` field they carry; a load that sends
  none leaves every request at the same priority (FIFO). The load then sends each request's prompt
  length as its priority (shorter first), and only then: V1 refuses the field under FCFS.
- Flags V1 removed (V0's multi-step scheduling, block managers, swap preemption) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from servescope.kit.tune.space import Space, Value

REMOVED = {
    "num_scheduler_steps": "multi-step scheduling is V0's; V1 schedules every step",
    "multi_step_stream_outputs": "multi-step scheduling is V0's",
    "use_v2_block_manager": "V1 has one KV cache manager",
    "preemption_mode": "V1 preempts by recomputation only",
    "swap_space": "V1 does not swap preempted requests to CPU memory",
}


def check_space(space: Space) -> None:
    """Refuse a space whose flags cannot take effect on a V1 engine; ValueError naming the flag."""
    for parameter in space.parameters:
        if parameter.name in REMOVED:
            raise ValueError(f"parameter {parameter.name!r}: not a vLLM V1 flag ({REMOVED[parameter.name]})")
        conditions = {name for name, _ in parameter.when}
        if parameter.name == "max_num_batched_tokens" and "enable_chunked_prefill" in conditions:
            raise ValueError(
                "parameter 'max_num_batched_tokens': in vLLM V1 it is every step's token budget whether or "
                "not chunked prefill is on; drop its `when` on enable_chunked_prefill"
            )
    for name in space.engine:
        if name in REMOVED:
            raise ValueError(f"engine flag {name!r}: not a vLLM V1 flag ({REMOVED[name]})")


def cannot_start(params: Mapping[str, Value]) -> str | None:
    """Why a configuration cannot start on a V1 engine, known before starting it; None when it can."""
    budget, model_len = params.get("max_num_batched_tokens"), params.get("max_model_len")
    chunked = params.get("enable_chunked_prefill", True)
    if chunked is False and isinstance(budget, int) and isinstance(model_len, int) and budget < model_len:
        return (
            f"with chunked prefill off a prompt must fit one step: max_num_batched_tokens {budget} is below "
            f"max_model_len {model_len} (vLLM V1 refuses to start)"
        )
    return None


def sends_priority(params: Mapping[str, Value]) -> bool:
    """Whether requests to this configuration carry vLLM's `priority` field."""
    return params.get("scheduling_policy") == "priority"
