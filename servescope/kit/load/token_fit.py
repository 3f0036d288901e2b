"""Random prompts measured in the engine's own tokens.

A random workload writes its prompts as common English words, about one token each for the large
vocabularies of production models. A smaller vocabulary splits them: the 1,024-token tokenizer of the
CPU test model makes about 4.8 tokens of a word, so "32 tokens" of words were 155 to the engine, and a
knee measured with them was a knee for prompts five times as long as the run said. vLLM counts a text
as its engine will at `POST /tokenize`; a sample of the workload's own prompts is counted there once,
and the words per token are scaled so that a prompt of N tokens is about N tokens to the engine. An
engine that cannot count (no such route, an error) leaves the words as they are, and the run says so.
"""

from __future__ import annotations

from dataclasses import replace

import httpx

from servescope.kit.load.runner import ShapeSource
from servescope.kit.load.workload import Workload

SAMPLE_PROMPTS = 16
SAMPLE_SEED = 0x70CE


def engine_token_count(base_url: str, model: str, text: str, timeout_s: float = 10.0) -> int:
    """How many tokens the engine makes of `text`, special tokens left out (they are the same for any
    prompt); ValueError naming the route when it cannot say."""
    url = f"{base_url.rstrip('/')}/tokenize"
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    try:
        answer = httpx.post(url, json=body, timeout=timeout_s, trust_env=False)
        answer.raise_for_status()
        count = answer.json()["count"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{url}: no token count ({exc})") from None
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"{url}: the count {count!r} is not a number of tokens")
    return count


def fit_to_engine(workload: ShapeSource, base_url: str, model: str) -> tuple[ShapeSource, str]:
    """`workload` with its random prompts' words scaled to the engine's tokenizer, and a line saying
    what was found ("" when there was nothing to fit: a dataset, the fixed prompt, another source)."""
    if not isinstance(workload, Workload) or workload.kind != "random":
        return workload, ""
    texts = [
        shape.prompt for shape in replace(workload, words_per_token=1.0).sample(SAMPLE_PROMPTS, SAMPLE_SEED)
    ]
    try:
        tokens = sum(engine_token_count(base_url, model, text) for text in texts)
    except ValueError as exc:
        return workload, f"prompt lengths are in words, about one token each: {exc}"
    words = sum(len(text.split()) for text in texts)
    if tokens <= 0:
        return workload, "prompt lengths are in words: the engine counted no tokens in them"
    per_word = tokens / words
    fitted = replace(workload, words_per_token=round(1 / per_word, 4))
    return fitted, (
        f"prompts fitted to the engine's tokenizer: {per_word:.2f} tokens a word, so "
        f"{fitted.words_per_token:g} words a token"
    )
