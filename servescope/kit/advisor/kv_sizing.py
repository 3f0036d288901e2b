"""KV-cache sizing from a Hugging Face config.json: bytes per token, weights, and sequences that fit."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from servescope.core.errors import ServescopeError

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4, "int8": 1}
_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


class SizingError(ServescopeError, ValueError):
    """Bad sizing input; the message starts with the input it is about."""

    reason = "sizing_invalid"


def parse_size(text: str, flag: str = "--gpu-memory") -> int:
    """Bytes from `141GiB`, `80GB`, `143771MiB` or a plain byte count."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise SizingError(f"{flag}: cannot read {text!r} (examples: 141GiB, 80GB, 143771MiB, 1000000)")
    return int(Fraction(match.group(1)) * _UNITS[unit])


def dtype_bytes(name: str, flag: str = "--dtype") -> int:
    """Bytes per element of a dtype name such as bf16 or fp8."""
    try:
        return DTYPE_BYTES[name.lower()]
    except KeyError:
        raise SizingError(f"{flag}: unknown dtype {name!r} (one of {', '.join(DTYPE_BYTES)})") from None


@dataclass(frozen=True)
class Mla:
    """DeepSeek multi-head latent attention shapes."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class Moe:
    """DeepSeek-style mixture of experts: routed plus shared experts after some dense layers."""

    routed_experts: int
    shared_experts: int
    intermediate: int
    first_dense: int
    layer_freq: int
    score_bias: bool

    def is_moe_layer(self, layer: int) -> bool:
        return layer >= self.first_dense and layer % self.layer_freq == 0


@dataclass(frozen=True)
class Architecture:
    """What sizing needs from config.json."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    tied_embeddings: bool
    mla: Mla | None
    moe: Moe | None
    other_moe_key: str | None  # an expert layout we cannot count (Mixtral, Qwen-MoE)
    declared_quantisation: str | None


def _int(
    config: Mapping[str, object], key: str, source: str, default: int | None = None, minimum: int = 1
) -> int:
    value = config.get(key)
    if value is None:
        if default is None:
            raise SizingError(f"{source}: missing {key}")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SizingError(f"{source}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def _mla(config: Mapping[str, object], source: str) -> Mla | None:
    if "kv_lora_rank" not in config or "qk_rope_head_dim" not in config:
        return None
    q_lora = config.get("q_lora_rank")
    return Mla(
        kv_lora_rank=_int(config, "kv_lora_rank", source),
        qk_rope_head_dim=_int(config, "qk_rope_head_dim", source),
        qk_nope_head_dim=_int(config, "qk_nope_head_dim", source),
        v_head_dim=_int(config, "v_head_dim", source),
        q_lora_rank=None if q_lora is None else _int(config, "q_lora_rank", source),
    )


def _moe(config: Mapping[str, object], source: str) -> Moe | None:
    if "n_routed_experts" not in config or config["n_routed_experts"] is None:
        return None
    return Moe(
        routed_experts=_int(config, "n_routed_experts", source),
        shared_experts=_int(config, "n_shared_experts", source, default=0, minimum=0),
        intermediate=_int(config, "moe_intermediate_size", source),
        first_dense=_int(config, "first_k_dense_replace", source, default=0, minimum=0),
        layer_freq=_int(config, "moe_layer_freq", source, default=1),
        # DeepSeek-V3's aux-loss-free routing adds one learnt bias per expert.
        score_bias=config.get("topk_method") == "noaux_tc",
    )


def read_architecture(config: Mapping[str, object], source: str = "config.json") -> Architecture:
    """The attention, MLP and embedding shapes of a Hugging Face config.json."""
    text_config = config.get("text_config")
    if "num_hidden_layers" not in config and isinstance(text_config, Mapping):
        config = text_config  # multimodal checkpoints keep the language model one level down
    hidden = _int(config, "hidden_size", source)
    heads = _int(config, "num_attention_heads", source)
    if config.get("head_dim") is None and hidden % heads:
        raise SizingError(f"{source}: num_attention_heads {heads} does not divide hidden_size {hidden}")
    quantisation = config.get("quantization_config")
    return Architecture(
        layers=_int(config, "num_hidden_layers", source),
        hidden=hidden,
        heads=heads,
        kv_heads=_int(config, "num_key_value_heads", source, default=heads),
        head_dim=_int(config, "head_dim", source, default=hidden // heads),
        vocab=_int(config, "vocab_size", source),
        intermediate=_int(config, "intermediate_size", source),
        tied_embeddings=config.get("tie_word_embeddings") is True,
        mla=_mla(config, source),
        moe=_moe(config, source),
        other_moe_key=next((k for k in ("num_local_experts", "num_experts") if config.get(k)), None),
        declared_quantisation=str(quantisation.get("quant_method"))
        if isinstance(quantisation, Mapping)
        else None,
    )


def kv_heads_per_gpu(arch: Architecture, tensor_parallel: int) -> int:
    """KV heads each GPU holds: split across GPUs, or replicated when there are fewer heads than GPUs."""
    if tensor_parallel < 1:
        raise SizingError(f"--tensor-parallel: expected at least 1, got {tensor_parallel}")
    if arch.heads % tensor_parallel:
        raise SizingError(
            f"--tensor-parallel {tensor_parallel}: does not divide num_attention_heads {arch.heads}"
        )
    if arch.mla is None and max(arch.kv_heads, tensor_parallel) % min(arch.kv_heads, tensor_parallel):
        raise SizingError(
            f"--tensor-parallel {tensor_parallel}: does not divide num_key_value_heads {arch.kv_heads}"
        )
    return max(1, arch.kv_heads // tensor_parallel)


def kv_bytes_per_token(arch: Architecture, kv_dtype_bytes: int, tensor_parallel: int = 1) -> int:
    """KV-cache bytes one token takes on one GPU."""
    kv_heads = kv_heads_per_gpu(arch, tensor_parallel)
    if arch.mla is not None:
        # vLLM caches MLA's compressed latent plus the shared RoPE key, one per layer, on every GPU.
        return arch.layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * kv_dtype_bytes
    return 2 * arch.layers * kv_heads * arch.head_dim * kv_dtype_bytes


def _attention_parameters(arch: Architecture) -> int:
    h = arch.hidden
    if arch.mla is None:
        query_and_output = 2 * h * arch.heads * arch.head_dim
        return query_and_output + 2 * h * arch.kv_heads * arch.head_dim
    mla = arch.mla
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is None:
        query = h * arch.heads * qk_head
    else:  # down-projection, its norm, up-projection
        query = h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * arch.heads * qk_head
    latent = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    up = mla.kv_lora_rank * arch.heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return query + latent + up + arch.heads * mla.v_head_dim * h


def _mlp_parameters(arch: Architecture, layer: int) -> int:
    # Gated (SwiGLU) MLPs: gate, up and down projections.
    moe = arch.moe
    if moe is None or not moe.is_moe_layer(layer):
        return 3 * arch.hidden * arch.intermediate
    experts = (moe.routed_experts + moe.shared_experts) * 3 * arch.hidden * moe.intermediate
    router = moe.routed_experts * arch.hidden + (moe.routed_experts if moe.score_bias else 0)
    return experts + router


def parameter_count(arch: Architecture, source: str = "config.json") -> int:
    """Parameters from the architecture (no biases, no MTP heads, no quantisation scales): an estimate."""
    if arch.moe is None and arch.other_moe_key is not None:
        raise SizingError(
            f"{source}: cannot count the experts of this MoE layout ({arch.other_moe_key}); "
            "pass --weights-bytes"
        )
    norms = 2 * arch.hidden
    layers = sum(_attention_parameters(arch) + _mlp_parameters(arch, i) + norms for i in range(arch.layers))
    embeddings = arch.vocab * arch.hidden * (1 if arch.tied_embeddings else 2)
    return embeddings + layers + arch.hidden


def operators_formula(gpu_memory: int, seq_len: int, hidden: int, kv_dtype_bytes: int) -> int:
    """The operators' `floor(VRAM / (2 * seq_len * hidden_size * dtype_bytes))`."""
    return gpu_memory // (2 * seq_len * hidden * kv_dtype_bytes)


@dataclass(frozen=True)
class Sizing:
    """How many sequences of seq_len fit in one GPU's KV budget, beside the operators' formula."""

    kv_bytes_per_token: int  # on one GPU
    weights_bytes: int  # whole model
    weights_per_gpu: int
    kv_budget: int  # gpu_memory * utilisation, per GPU
    memory_left: int  # per GPU, negative when the weights alone do not fit
    max_sequences: int
    operators_formula: int


def size(
    arch: Architecture,
    *,
    gpu_memory: int,
    utilisation: float,
    seq_len: int,
    kv_dtype_bytes: int,
    weights_bytes: int,
    tensor_parallel: int = 1,
) -> Sizing:
    """Per-GPU sizing; tensor parallelism splits the weights (and, without MLA, the KV heads)."""
    if not 0.0 < utilisation <= 1.0:
        raise SizingError(f"--gpu-memory-utilization: expected a fraction in (0, 1], got {utilisation}")
    if seq_len < 1:
        raise SizingError(f"--seq-len: expected at least 1, got {seq_len}")
    per_token = kv_bytes_per_token(arch, kv_dtype_bytes, tensor_parallel)
    # Exact decimal fraction: 0.9 of 141 GiB must not become …465.59999 by binary rounding.
    budget = math.floor(gpu_memory * Fraction(str(utilisation)))
    weights_per_gpu = -(-weights_bytes // tensor_parallel)
    left = budget - weights_per_gpu
    return Sizing(
        kv_bytes_per_token=per_token,
        weights_bytes=weights_bytes,
        weights_per_gpu=weights_per_gpu,
        kv_budget=budget,
        memory_left=left,
        max_sequences=max(0, left // (per_token * seq_len)),
        operators_formula=operators_formula(gpu_memory, seq_len, arch.hidden, kv_dtype_bytes),
    )


def human_bytes(count: int) -> str:
    """`15.0 GiB`-style text for a byte count (binary units, as nvidia-smi and vLLM's logs use)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def formula_gap(arch: Architecture, sizing: Sizing, *, utilisation: float, tensor_parallel: int) -> list[str]:
    """Plain-words reasons why the operators' formula and the computed maximum differ."""
    reasons = [f"it counts one layer; this model has {arch.layers}, each with its own cache"]
    if arch.mla is not None:
        latent = arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim
        reasons.append(
            f"it stores K and V {arch.hidden} wide per token; MLA caches one latent of kv_lora_rank + "
            f"qk_rope_head_dim = {latent} values per layer instead, replicated on every GPU (vLLM does not "
            "split it under tensor parallelism)"
        )
    elif arch.kv_heads * arch.head_dim != arch.hidden or tensor_parallel > 1:
        split = f"; tensor parallelism puts {kv_heads_per_gpu(arch, tensor_parallel)} on each GPU"
        reasons.append(
            f"it stores K and V {arch.hidden} wide per token; {arch.kv_heads} of {arch.heads} heads keep "
            f"K/V, {arch.head_dim} wide each{split if tensor_parallel > 1 else ''}"
        )
    reasons.append(f"it leaves no room for the weights ({human_bytes(sizing.weights_per_gpu)} per GPU)")
    if utilisation < 1.0:
        reasons.append(f"it divides all of VRAM; vLLM takes only --gpu-memory-utilization {utilisation}")
    return reasons
