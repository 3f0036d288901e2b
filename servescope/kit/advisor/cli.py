"""`servescope advise batch-size`: how many sequences a model's KV cache fits on a GPU, from config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from servescope.core.cli_errors import usage_error
from servescope.core.cli_group import command_group
from servescope.kit.advisor.kv_sizing import (
    Architecture,
    Sizing,
    SizingError,
    dtype_bytes,
    formula_gap,
    human_bytes,
    parameter_count,
    parse_size,
    read_architecture,
    size,
)

app = command_group("Advice for serving settings, computed from a model's config.")

# Quantised weights still compute (and, with vLLM's --kv-cache-dtype auto, cache) in 16-bit activations.
_FLOAT_DTYPES = ("bf16", "fp16", "fp32")


def _load_config(path: Path) -> Architecture:
    try:
        config = json.loads(path.read_text())
    except OSError as exc:
        raise SizingError(f"--model-config: cannot read {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SizingError(f"{path}: not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SizingError(f"{path}: expected a JSON object, got {type(config).__name__}")
    return read_architecture(config, source=path.name)


def _notes(arch: Architecture, sizing: Sizing, dtype: str, estimated: bool) -> list[str]:
    notes = []
    if estimated:
        notes.append(
            "weights are an estimate from the architecture (no biases, MTP layers or quantisation scales); "
            "--weights-bytes takes the checkpoint's real size"
        )
    if arch.declared_quantisation and arch.declared_quantisation != dtype:
        notes.append(
            f"config.json declares {arch.declared_quantisation} weights; --dtype {dtype} is what was sized"
        )
    if sizing.memory_left <= 0:
        notes.append(
            f"the weights ({human_bytes(sizing.weights_per_gpu)} per GPU) leave nothing of the KV budget "
            f"({human_bytes(sizing.kv_budget)}): raise --tensor-parallel or lower --dtype"
        )
    notes.append(
        "vLLM also keeps activations and CUDA graphs inside the budget, so its KV cache holds somewhat "
        "fewer sequences than this upper bound"
    )
    return notes


@dataclass(frozen=True)
class Request:
    """The command's options, as given."""

    config: Path
    gpu_memory: str
    seq_len: int
    dtype: str
    kv_dtype: str | None
    utilisation: float
    tensor_parallel: int
    weights: str | None


@dataclass(frozen=True)
class Advice:
    """Everything the command prints."""

    request: Request
    arch: Architecture
    kv_dtype: str
    parameters: int | None
    sizing: Sizing
    reasons: list[str]
    notes: list[str]


def _advise(request: Request) -> Advice:
    arch = _load_config(request.config)
    dtype = request.dtype.lower()
    weight_bytes = dtype_bytes(dtype, "--dtype")
    kv_dtype = (request.kv_dtype or (dtype if dtype in _FLOAT_DTYPES else "bf16")).lower()
    parameters = None if request.weights else parameter_count(arch, source=request.config.name)
    total_weights = parse_size(request.weights, "--weights-bytes") if request.weights else 0
    sizing = size(
        arch,
        gpu_memory=parse_size(request.gpu_memory, "--gpu-memory"),
        utilisation=request.utilisation,
        seq_len=request.seq_len,
        kv_dtype_bytes=dtype_bytes(kv_dtype, "--kv-dtype"),
        weights_bytes=total_weights or (parameters or 0) * weight_bytes,
        tensor_parallel=request.tensor_parallel,
    )
    reasons = formula_gap(
        arch, sizing, utilisation=request.utilisation, tensor_parallel=request.tensor_parallel
    )
    notes = _notes(arch, sizing, dtype, estimated=parameters is not None)
    return Advice(request, arch, kv_dtype, parameters, sizing, reasons, notes)


def _as_json(advice: Advice) -> dict[str, object]:
    request, sizing = advice.request, advice.sizing
    return {
        "model_config": str(request.config),
        "attention": "mla" if advice.arch.mla else "standard",
        "dtype": request.dtype.lower(),
        "kv_dtype": advice.kv_dtype,
        "tensor_parallel": request.tensor_parallel,
        "seq_len": request.seq_len,
        "gpu_memory_bytes": parse_size(request.gpu_memory),
        "gpu_memory_utilization": request.utilisation,
        "parameters_estimate": advice.parameters,
        "weights_source": "estimate" if advice.parameters is not None else "--weights-bytes",
        "kv_bytes_per_token_per_gpu": sizing.kv_bytes_per_token,
        "weights_bytes": sizing.weights_bytes,
        "weights_bytes_per_gpu": sizing.weights_per_gpu,
        "kv_budget_bytes_per_gpu": sizing.kv_budget,
        "memory_left_bytes_per_gpu": sizing.memory_left,
        "max_sequences": sizing.max_sequences,
        "operators_formula": sizing.operators_formula,
        "operators_formula_differs_because": advice.reasons,
        "notes": advice.notes,
    }


def _bytes(count: int) -> str:
    return f"{count:,} B ({human_bytes(count)})"


def _table(advice: Advice) -> str:
    request, sizing = advice.request, advice.sizing
    weights = "estimate" if advice.parameters is not None else "--weights-bytes"
    rows = [
        ("KV bytes per token per GPU", f"{sizing.kv_bytes_per_token:,} B"),
        (f"weights ({weights})", _bytes(sizing.weights_bytes)),
        ("weights per GPU", _bytes(sizing.weights_per_gpu)),
        (f"KV budget per GPU (x {request.utilisation})", _bytes(sizing.kv_budget)),
        ("memory left for KV per GPU", _bytes(sizing.memory_left)),
        (f"max sequences at {request.seq_len} tokens", f"{sizing.max_sequences:,}"),
        ("operators' formula", f"{sizing.operators_formula:,}"),
    ]
    if advice.parameters is not None:
        rows.insert(1, ("parameters (estimate)", f"{advice.parameters:,}"))
    width = max(len(label) for label, _ in rows)
    attention = "MLA" if advice.arch.mla else "standard attention"
    lines = [
        f"{request.config.name}: {attention}, weights {request.dtype.lower()}, KV {advice.kv_dtype}, "
        f"tensor parallel {request.tensor_parallel}",
        *(f"  {label.ljust(width)}  {value}" for label, value in rows),
        "the operators' formula differs because",
        *(f"  - {reason}" for reason in advice.reasons),
        "notes",
        *(f"  - {note}" for note in advice.notes),
    ]
    return "\n".join(lines)


@app.command("batch-size")
def batch_size(  # noqa: PLR0917 (typer declares one parameter per option)
    model_config: Annotated[Path, typer.Option(help="The model's Hugging Face config.json.")],
    gpu_memory: Annotated[str, typer.Option(help="Memory of one GPU: 141GiB, 80GB, 143771MiB.")] = "141GiB",
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence (prompt + output).")] = 4096,
    dtype: Annotated[str, typer.Option(help="Weight dtype: bf16, fp16, fp8, fp32, int8.")] = "bf16",
    kv_dtype: Annotated[
        str | None, typer.Option(help="KV-cache dtype; default --dtype, or bf16 under fp8/int8 weights.")
    ] = None,
    gpu_memory_utilization: Annotated[
        float, typer.Option(help="Fraction of GPU memory vLLM may use (its flag of the same name).")
    ] = 0.9,
    tensor_parallel: Annotated[int, typer.Option(help="GPUs one model replica is split across.")] = 1,
    weights_bytes: Annotated[
        str | None,
        typer.Option(help="Whole-model weight size instead of the estimate, e.g. 16GB or 16060522496."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Max concurrent sequences at --seq-len from KV bytes per token, beside the operators' formula."""
    request = Request(
        model_config,
        gpu_memory,
        seq_len,
        dtype,
        kv_dtype,
        gpu_memory_utilization,
        tensor_parallel,
        weights_bytes,
    )
    try:
        advice = _advise(request)
    except SizingError as exc:
        usage_error(str(exc))
    typer.echo(json.dumps(_as_json(advice), indent=2) if as_json else _table(advice))
