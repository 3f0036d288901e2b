"""Random prompts of N tokens are N tokens to the engine: their words are fitted to its tokenizer through
its `/tokenize`, and the engine's own prompt-token counter is the judge."""

from __future__ import annotations

import pytest

from servescope.kit.load.endpoint import EndpointStepRunner
from servescope.kit.load.token_fit import fit_to_engine
from servescope.kit.load.workload import Workload
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig
from tests.support.engine_page import counter_total
from tests.support.http_fakes import QuietHandler, loopback_http

PROMPT_TOKENS = 64


def _engine_prompt_tokens_per_request(base_url: str) -> float:
    """The engine's prompt tokens over its finished requests, from its own /metrics."""
    return counter_total(base_url, "prompt_tokens") / counter_total(base_url, "request_success")


def test_a_workload_fitted_at_a_quarter_word_a_token_writes_a_quarter_of_the_words() -> None:
    fitted = Workload(prompt_tokens=PROMPT_TOKENS, words_per_token=0.25)
    assert {len(shape.prompt.split()) for shape in fitted.sample(20, seed=3)} == {16}
    assert all(shape.prompt_tokens == PROMPT_TOKENS for shape in fitted.sample(20, seed=3))
    assert fitted.describe()["words_per_token"] == 0.25
    assert "words_per_token" not in Workload().describe()  # results from before the fit still compare
    with pytest.raises(ValueError, match="words per token"):
        Workload(words_per_token=0.0)


@pytest.mark.e2e
def test_an_engine_whose_tokenizer_splits_words_sees_prompts_of_the_asked_length() -> None:
    with mock_process(MockConfig(slots=16, ttft_s=0.005, token_s=0.001, tokens_per_word=4)) as engine:
        said: list[str] = []
        runner = EndpointStepRunner(
            engine.base_url,
            workload=Workload(prompt_tokens=PROMPT_TOKENS, output_tokens=4),
            progress=said.append,
        )
        runner.check()
        assert isinstance(runner.workload, Workload)
        assert runner.workload.words_per_token == 0.25
        assert "4.00 tokens a word" in said[0], said
        assert runner.workload.describe()["words_per_token"] == 0.25
        result = runner.run_step(10.0, 2.0, seed=1)
        assert result.records, "the step sent requests"
        seen = _engine_prompt_tokens_per_request(engine.base_url)
    # Unfitted, the engine would have seen 256 tokens a prompt.
    assert PROMPT_TOKENS * 0.9 <= seen <= PROMPT_TOKENS * 1.1, seen


class _NoTokenize(QuietHandler):
    def answer(self, method: str) -> None:
        self.reply(404, b'{"detail": "Not Found"}', "application/json")


def test_an_engine_that_cannot_count_tokens_keeps_the_words_and_the_run_says_why() -> None:
    asked = Workload(prompt_tokens=PROMPT_TOKENS)
    with loopback_http(_NoTokenize) as url:
        kept, said = fit_to_engine(asked, url, "m")
    assert kept is asked
    assert said.startswith("prompt lengths are in words") and f"{url}/tokenize" in said and "404" in said


def test_a_fixed_prompt_or_a_dataset_is_not_fitted() -> None:
    fixed = Workload(kind="fixed")
    assert fit_to_engine(fixed, "http://127.0.0.1:9", "m") == (fixed, "")
