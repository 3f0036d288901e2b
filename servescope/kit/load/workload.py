"""What the requests ask: random prompts with a shared-prefix knob, a dataset, or the fixed prompt.

A capacity figure holds only for the workload it was measured with. A prompt of one repeated word is
almost all prefix-cache hits on a real engine (its prefill is nearly free), so the default is random
text: words drawn from a common-English vocabulary (about one token each for the usual BPE tokenizers),
with `prefix_share` of every prompt's words the same for all requests (a system prompt). A dataset is a
JSONL file of ShareGPT-style conversations, `{"prompt": ..., "output_tokens": N}` or
`{"prompt_tokens": N, "output_tokens": M}` lines. Every result records the workload (`describe`), so
two runs compare only when they asked the same.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servescope.kit.load.schedule import MAX_LENGTH, Shape, json_object, read_jsonl

WorkloadKind = Literal["random", "fixed", "dataset"]
WORKLOADS: tuple[WorkloadKind, ...] = ("random", "fixed", "dataset")
CHARS_PER_TOKEN = 4  # a dataset's reply length in tokens, estimated from its text (English, BPE)
MAX_DATASET_BYTES = 256 * 1024 * 1024
VOCABULARY = tuple(
    """time year people way day man thing woman life child world school state family student group
    country problem hand part place case week company system program question work government number
    night point home water room mother area money story fact month lot right study book eye job word
    business issue side kind head house service friend father power hour game line end member law car
    city community name president team minute idea kid body information back parent face others level
    office door health person art war history party result change morning reason research girl guy
    moment air teacher force education foot boy age policy process music market sense nation plan
    college interest death experience effect use class control care field development role effort rate
    heart drug show leader light voice wife police mind price report decision son view relationship town
    road arm difference value building action model season society tax director position player record
    paper space ground form event official matter center couple site project activity star table need
    court oil situation cost industry figure street image phone data picture practice piece land product
    doctor wall patient worker news test movie north love support technology step baby computer type
    attention film tree source organization hair window evidence population truth chance south river
    """.split()  # noqa: SIM905 (a word list reads best as words)
)


@dataclass(frozen=True, slots=True)
class Workload:
    """How each request's prompt and output length are chosen (see the module docstring)."""

    kind: WorkloadKind = "random"
    prompt_tokens: int = 128  # mean prompt length (random, fixed)
    output_tokens: int = 32  # mean output length (random, fixed)
    spread: float = 0.0  # uniform spread of both lengths around their means (0.2: +-20 %)
    prefix_share: float = 0.0  # share of each random prompt that every request shares
    dataset: tuple[Shape, ...] = ()
    dataset_name: str = ""
    dataset_sha256: str = ""
    # Words a random prompt holds per token it is meant to have: 1 until fitted to the engine's own
    # tokenizer (load/token_fit.py), whose vocabulary may split a common word into several tokens.
    words_per_token: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.prefix_share <= 1 or not 0 <= self.spread < 1:
            raise ValueError(f"prefix share {self.prefix_share} and spread {self.spread} must be in [0, 1)")
        if not 0 < self.words_per_token <= 100:
            raise ValueError(f"words per token {self.words_per_token} must be in (0, 100]")
        if self.kind == "dataset" and not self.dataset:
            raise ValueError("a dataset workload needs a dataset with at least one request")

    def sample(self, count: int, seed: int) -> list[Shape]:
        """`count` requests drawn from `seed`: the same seed asks the same requests, in any runner."""
        rng = random.Random(seed ^ 0x5EED)
        if self.kind == "dataset":
            return [self.dataset[rng.randrange(len(self.dataset))] for _ in range(count)]
        shapes = []
        for _ in range(count):
            prompt, output = (
                _spread(rng, self.prompt_tokens, self.spread),
                _spread(rng, self.output_tokens, self.spread),
            )
            shapes.append(Shape(prompt, output, self._text(rng, prompt)))
        return shapes

    def _text(self, rng: random.Random, tokens: int) -> str:
        if self.kind == "fixed":
            return ""  # the client's fixed prompt, one repeated word (nearly all prefix-cache hits)
        words = max(1, round(tokens * self.words_per_token))
        shared = round(self.prefix_share * words)
        return " ".join([*shared_prefix(shared), *(rng.choice(VOCABULARY) for _ in range(words - shared))])

    def describe(self) -> dict[str, Any]:
        """What a result records of the workload; two runs compare only when these are equal."""
        if self.kind == "dataset":
            return {"kind": "dataset", "dataset": self.dataset_name, "sha256": self.dataset_sha256}
        described: dict[str, Any] = {
            "kind": self.kind,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "spread": self.spread,
        }
        if self.kind == "random":
            described["prefix_share"] = self.prefix_share
            # Each step draws prompts of its own (schedule.step_prompts_seed): a result from before,
            # whose steps re-sent each other's prompts to a prefix-caching engine, is another workload.
            described["prompts"] = "per step"
            if self.words_per_token != 1.0:  # results from before the fit compare as they did
                described["words_per_token"] = self.words_per_token
        return described


def shared_prefix(words: int) -> list[str]:
    """The words every request's prompt starts with (one fixed draw, a system prompt's stand-in)."""
    rng = random.Random(0x9E3779B9)
    return [rng.choice(VOCABULARY) for _ in range(words)]


def _spread(rng: random.Random, mean: int, spread: float) -> int:
    if spread <= 0:
        return max(1, mean)
    return max(1, round(mean * (1 + rng.uniform(-spread, spread))))


def read_dataset(path: Path, max_output_tokens: int = 1024) -> tuple[Workload, int]:
    """A dataset workload from a JSONL file, and how many lines were skipped (bad or without a reply).

    Raises ValueError naming the file when no line is usable or the file is too large.
    """
    if path.stat().st_size > MAX_DATASET_BYTES:
        raise ValueError(f"{path}: larger than {MAX_DATASET_BYTES} bytes")
    digest = hashlib.sha256()
    with path.open("rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest.update(block)
    shapes, skipped = read_jsonl(path, lambda line: dataset_shape(line, max_output_tokens))
    if not shapes:
        raise ValueError(
            f"{path}: no usable line (ShareGPT conversations, prompt + output_tokens, or prompt_tokens + "
            "output_tokens)"
        )
    workload = Workload(
        "dataset", dataset=tuple(shapes), dataset_name=path.name, dataset_sha256=digest.hexdigest()
    )
    return workload, skipped


def dataset_shape(line: str, max_output_tokens: int) -> Shape | None:
    """One request from one JSONL line, or None when the line gives none."""
    item = json_object(line)
    if item is None:
        return None
    prompt, reply = _turns(item)
    output = item.get("output_tokens")
    if isinstance(output, int) and _length(output):
        tokens = output
    elif reply:
        tokens = max(1, round(len(reply) / CHARS_PER_TOKEN))
    else:
        return None
    tokens = min(tokens, max_output_tokens)
    if prompt:
        return Shape(max(1, round(len(prompt) / CHARS_PER_TOKEN)), tokens, prompt)
    length = item.get("prompt_tokens")
    if isinstance(length, int) and _length(length):
        random_prompt = Workload("random", length, tokens).sample(1, zlib.crc32(line.encode()))[0]
        return Shape(length, tokens, random_prompt.prompt)
    return None


def _turns(item: dict[str, Any]) -> tuple[str, str]:
    """The first user turn and the reply after it: ShareGPT `conversations`, OpenAI `messages`, or
    plain `prompt` (no reply)."""
    if isinstance(item.get("prompt"), str):
        return item["prompt"], ""
    turns = item.get("conversations") or item.get("messages")
    if not isinstance(turns, list):
        return "", ""
    texts = [
        (str(turn.get("from") or turn.get("role")), turn.get("value") or turn.get("content"))
        for turn in turns
        if isinstance(turn, dict)
    ]
    for index, (who, text) in enumerate(texts[:-1]):
        reply = texts[index + 1][1]
        if who in ("human", "user") and isinstance(text, str) and text and isinstance(reply, str) and reply:
            return text, reply
    return "", ""


def _length(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_LENGTH
