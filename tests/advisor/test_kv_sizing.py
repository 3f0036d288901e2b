"""KV-cache sizing and `advise batch-size` on Llama-3.1-8B and DeepSeek-V3, against numbers worked by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servescope.kit.advisor.cli import app
from servescope.kit.advisor.kv_sizing import (
    SizingError,
    kv_bytes_per_token,
    parameter_count,
    parse_size,
    read_architecture,
)

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "llama-3.1-8b-config.json"
DEEPSEEK = FIXTURES / "deepseek-v3-config.json"

H200 = 141 * 2**30  # 151_397_597_184 bytes, the default --gpu-memory
BUDGET = 136_257_837_465  # floor(151_397_597_184 * 0.9) = floor(136_257_837_465.6)

# Llama-3.1-8B: 32 layers, hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336, vocab 128256, untied.
LLAMA_PARAMETERS = (
    128_256 * 4096 * 2  # embeddings + lm_head = 1_050_673_152
    + 32
    * (
        2 * 4096 * 32 * 128  # q and o projections = 33_554_432
        + 2 * 4096 * 8 * 128  # k and v projections = 8_388_608
        + 3 * 4096 * 14_336  # gate, up, down = 176_160_768
        + 2 * 4096  # two RMSNorms
    )  # 32 * 218_112_000 = 6_979_584_000
    + 4096  # final norm
)
# DeepSeek-V3: 61 layers (3 dense, 58 MoE), hidden 7168, 128 heads, MLA ranks q 1536 / kv 512, rope 64,
# nope 128, v 128; 256 routed + 1 shared expert of 2048; dense MLP 18432; vocab 129280, untied.
MLA_ATTENTION = (
    7168 * 1536 + 1536  # q down-projection and its norm = 11_011_584
    + 1536 * 128 * (128 + 64)  # q up-projection = 37_748_736
    + 7168 * (512 + 64) + 512  # kv latent + rope key down-projection and norm = 4_129_280
    + 512 * 128 * (128 + 128)  # kv up-projection = 16_777_216
    + 128 * 128 * 7168  # o projection = 117_440_512
)  # fmt: skip
DEEPSEEK_PARAMETERS = (
    129_280 * 7168 * 2  # embeddings + lm_head = 1_853_358_080
    + 3 * (MLA_ATTENTION + 3 * 7168 * 18_432 + 2 * 7168)  # 3 * 583_483_392 = 1_750_450_176
    + 58
    * (
        MLA_ATTENTION
        + (256 + 1) * 3 * 7168 * 2048  # routed + shared experts = 11_318_329_344
        + 256 * 7168 + 256  # router and its noaux_tc score bias = 1_835_264
        + 2 * 7168
    )  # 58 * 11_507_286_272 = 667_422_603_776
    + 7168  # final norm
)  # fmt: skip


def test_kv_bytes_per_token_by_hand() -> None:
    llama = read_architecture(json.loads(LLAMA.read_text()))
    deepseek = read_architecture(json.loads(DEEPSEEK.read_text()))
    assert kv_bytes_per_token(llama, 2) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_token(llama, 1) == 65_536  # fp8 KV
    assert kv_bytes_per_token(llama, 2, tensor_parallel=8) == 2 * 32 * 1 * 128 * 2 == 16_384
    # Fewer KV heads than GPUs: vLLM replicates, each GPU still holds one head.
    assert kv_bytes_per_token(llama, 2, tensor_parallel=16) == 16_384
    assert kv_bytes_per_token(deepseek, 2) == 61 * (512 + 64) * 2 == 70_272
    # The MLA latent is replicated on every GPU, not split.
    assert kv_bytes_per_token(deepseek, 2, tensor_parallel=8) == 70_272


def test_parameter_counts_by_hand() -> None:
    assert LLAMA_PARAMETERS == 8_030_261_248  # the published 8.03B
    assert MLA_ATTENTION == 187_107_328
    assert DEEPSEEK_PARAMETERS == 671_026_419_200  # the published 671B (without the 14B MTP module)
    assert parameter_count(read_architecture(json.loads(LLAMA.read_text()))) == LLAMA_PARAMETERS
    assert parameter_count(read_architecture(json.loads(DEEPSEEK.read_text()))) == DEEPSEEK_PARAMETERS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("141GiB", 141 * 2**30),
        ("80GB", 80 * 10**9),
        ("143771MiB", 143_771 * 2**20),  # what nvidia-smi reports for an H200
        ("1.5GiB", 1_610_612_736),
        ("16060522496", 16_060_522_496),
        ("512 kib", 524_288),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["14x1GiB", "", "GiB", "-5GB", "5PB", "1e9"])
def test_parse_size_names_the_flag(text: str) -> None:
    with pytest.raises(SizingError, match=f"--gpu-memory: cannot read '{text}'"):
        parse_size(text)


def advise(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["batch-size", *args, "--json"])
    assert result.exit_code == 0, result.output
    body: dict[str, object] = json.loads(result.stdout)
    return body


def test_llama_on_one_h200() -> None:
    body = advise("--model-config", str(LLAMA))
    assert body["gpu_memory_bytes"] == H200
    assert body["kv_bytes_per_token_per_gpu"] == 131_072
    assert body["parameters_estimate"] == LLAMA_PARAMETERS
    assert body["weights_bytes"] == 8_030_261_248 * 2 == 16_060_522_496
    assert body["kv_budget_bytes_per_gpu"] == BUDGET
    assert body["memory_left_bytes_per_gpu"] == BUDGET - 16_060_522_496 == 120_197_314_969
    # One sequence of 4096 tokens: 131_072 * 4096 = 536_870_912 bytes (512 MiB);
    # 120_197_314_969 / 536_870_912 = 223.88 -> 223.
    assert body["max_sequences"] == 223
    # Operators: 151_397_597_184 / (2 * 4096 * 4096 * 2 = 67_108_864) = 2256 exactly, 10x too many.
    assert body["operators_formula"] == 2256


def test_llama_tensor_parallel_8() -> None:
    body = advise("--model-config", str(LLAMA), "--tensor-parallel", "8")
    assert body["kv_bytes_per_token_per_gpu"] == 16_384  # one of the 8 KV heads per GPU
    assert body["weights_bytes_per_gpu"] == 16_060_522_496 // 8 == 2_007_565_312
    assert body["memory_left_bytes_per_gpu"] == BUDGET - 2_007_565_312 == 134_250_272_153
    # 134_250_272_153 / (16_384 * 4096 = 67_108_864) = 2000.48 -> 2000.
    assert body["max_sequences"] == 2000
    assert body["operators_formula"] == 2256  # the formula knows nothing of tensor parallelism


def test_llama_with_other_memory_weights_and_kv_dtype() -> None:
    # 80e9 * 0.9 = 72e9; minus 16_060_522_496 = 55_939_477_504; / 536_870_912 = 104.19 -> 104.
    assert advise("--model-config", str(LLAMA), "--gpu-memory", "80GB")["max_sequences"] == 104
    # Given weights of 10e9: 136_257_837_465 - 10e9 = 126_257_837_465; / 536_870_912 = 235.17 -> 235.
    body = advise("--model-config", str(LLAMA), "--weights-bytes", "10GB")
    assert (body["weights_source"], body["parameters_estimate"], body["max_sequences"]) == (
        "--weights-bytes",
        None,
        235,
    )
    # fp8 KV halves the per-token bytes: 120_197_314_969 / (65_536 * 4096 = 268_435_456) = 447.77 -> 447.
    assert advise("--model-config", str(LLAMA), "--kv-dtype", "fp8")["max_sequences"] == 447
    # Utilisation 0.5: 75_698_798_592 - 16_060_522_496 = 59_638_276_096; / 536_870_912 = 111.08 -> 111.
    assert advise("--model-config", str(LLAMA), "--gpu-memory-utilization", "0.5")["max_sequences"] == 111


def test_deepseek_bf16_does_not_fit_one_h200_nor_eight() -> None:
    body = advise("--model-config", str(DEEPSEEK))
    assert body["kv_bytes_per_token_per_gpu"] == 70_272
    assert body["weights_bytes"] == 671_026_419_200 * 2 == 1_342_052_838_400
    assert body["memory_left_bytes_per_gpu"] == BUDGET - 1_342_052_838_400 == -1_205_795_000_935
    assert body["max_sequences"] == 0
    # Operators: 151_397_597_184 / (2 * 4096 * 7168 * 2 = 117_440_512) = 1289.14 -> 1289.
    assert body["operators_formula"] == 1289
    notes = " ".join(body["notes"])  # type: ignore[arg-type]
    assert "declares fp8 weights" in notes and "leave nothing of the KV budget" in notes
    # TP=8 in bf16: 1_342_052_838_400 / 8 = 167_756_604_800 per GPU, still above the budget.
    body = advise("--model-config", str(DEEPSEEK), "--tensor-parallel", "8")
    assert body["weights_bytes_per_gpu"] == 167_756_604_800
    assert body["memory_left_bytes_per_gpu"] == BUDGET - 167_756_604_800 == -31_498_767_335
    assert body["max_sequences"] == 0


def test_deepseek_fp8_on_eight_h200() -> None:
    body = advise("--model-config", str(DEEPSEEK), "--dtype", "fp8", "--tensor-parallel", "8")
    assert body["kv_dtype"] == "bf16"  # quantised weights still cache KV in 16 bits by default
    assert body["kv_bytes_per_token_per_gpu"] == 70_272  # latent replicated, not split by TP
    assert body["weights_bytes_per_gpu"] == 671_026_419_200 // 8 == 83_878_302_400
    assert body["memory_left_bytes_per_gpu"] == BUDGET - 83_878_302_400 == 52_379_535_065
    # One sequence: 70_272 * 4096 = 287_834_112 bytes; 52_379_535_065 / 287_834_112 = 181.98 -> 181.
    assert body["max_sequences"] == 181
    assert "declares fp8" not in " ".join(body["notes"])  # type: ignore[arg-type]
    # On one H200 even fp8 weights (671_026_419_200 bytes) exceed the 136_257_837_465 budget.
    assert advise("--model-config", str(DEEPSEEK), "--dtype", "fp8")["max_sequences"] == 0


def test_text_table_explains_the_gap() -> None:
    result = CliRunner().invoke(app, ["batch-size", "--model-config", str(LLAMA)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0] == "llama-3.1-8b-config.json: standard attention, weights bf16, KV bf16, tensor parallel 1"
    )
    text = result.stdout
    assert "KV bytes per token per GPU    131,072 B" in text
    assert "max sequences at 4096 tokens  223" in text
    assert "operators' formula            2,256" in text
    assert "this model has 32" in text and "8 of 32 heads keep K/V" in text
    assert "no room for the weights (15.0 GiB per GPU)" in text and "utilization 0.9" in text
    mla = CliRunner().invoke(app, ["batch-size", "--model-config", str(DEEPSEEK), "--dtype", "fp8"])
    assert "= 576 values per layer instead, replicated on every GPU" in mla.stdout


# The options (split on spaces) and the one line each is refused with.
BAD_OPTIONS = {
    "--gpu-memory 14x1GiB": "--gpu-memory: cannot read '14x1GiB'",
    "--weights-bytes lots": "--weights-bytes: cannot read 'lots'",
    "--dtype fp4": "--dtype: unknown dtype 'fp4'",
    "--kv-dtype q8": "--kv-dtype: unknown dtype 'q8'",
    "--tensor-parallel 3": "--tensor-parallel 3: does not divide num_attention_heads 32",
    "--tensor-parallel 0": "--tensor-parallel: expected at least 1, got 0",
    "--gpu-memory-utilization 1.5": r"--gpu-memory-utilization: expected a fraction in \(0, 1\]",
    "--seq-len 0": "--seq-len: expected at least 1, got 0",
}


@pytest.mark.parametrize(("args", "message"), [(a.split(), m) for a, m in BAD_OPTIONS.items()])
def test_bad_options_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["batch-size", "--model-config", str(LLAMA), *args])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("servescope: error: ")
    assert re.search(message, result.stderr), result.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"hidden_size": 4096}, "config.json: missing num_attention_heads"),
        ({"hidden_size": 4096, "num_attention_heads": 32}, "config.json: missing num_hidden_layers"),
        ({"hidden_size": "4096"}, "config.json: hidden_size must be an integer >= 1, got '4096'"),
        (
            {"hidden_size": 4096, "num_attention_heads": 0},
            "config.json: num_attention_heads must be an integer >= 1, got 0",
        ),
        (
            {"hidden_size": 4096, "num_attention_heads": 30},
            "config.json: num_attention_heads 30 does not divide hidden_size 4096",
        ),
    ],
)
def test_bad_configs_name_the_key(tmp_path: Path, config: dict[str, object], message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["batch-size", "--model-config", str(path)])
    assert result.exit_code == 2
    assert result.stderr == f"servescope: error: {message}\n"


def test_unreadable_and_non_json_configs(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["batch-size", "--model-config", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "--model-config: cannot read" in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    bad = CliRunner().invoke(app, ["batch-size", "--model-config", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "bad.json: not JSON" in bad.stderr


def test_an_uncountable_moe_needs_weights_bytes(tmp_path: Path) -> None:
    # Mixtral-8x7B's shape: experts under num_local_experts, which the estimate does not count.
    mixtral = {**json.loads(LLAMA.read_text()), "num_local_experts": 8, "vocab_size": 32000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(mixtral))
    refused = CliRunner().invoke(app, ["batch-size", "--model-config", str(path)])
    assert refused.exit_code == 2 and "pass --weights-bytes" in refused.stderr
    body = advise("--model-config", str(path), "--weights-bytes", "93GB")
    # 136_257_837_465 - 93e9 = 43_257_837_465; / 536_870_912 = 80.57 -> 80.
    assert body["max_sequences"] == 80
