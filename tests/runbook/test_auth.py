"""The one token check of the runbook service: change steps and the webhook read a header the same way."""

from __future__ import annotations

import pytest

from servescope.runbooks.auth import WebhookAuth, bearer, refusal


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer tok", "tok"),
        ("bearer tok", "tok"),
        ("  BEARER   tok  ", "tok"),
        ("Bearer ", None),
        ("Basic dTpw", None),
        ("tok", None),
        ("", None),
        (None, None),
    ],
)
def test_the_bearer_token_of_a_header(header: str | None, token: str | None) -> None:
    assert bearer(header) == token


def test_why_a_change_step_is_refused() -> None:
    assert refusal(None, "anything") == "refused_not_configured"
    assert refusal("", "anything") == "refused_not_configured"
    assert refusal("s3cret", None) == "refused_no_token"
    assert refusal("s3cret", "s3cre") == "refused_bad_token"
    assert refusal("s3cret", "s3cret\udcff") == "refused_bad_token"  # not valid text: no crash, no match
    assert refusal("s3cret", "s3cret") is None


def test_the_webhook_reads_the_header_as_change_steps_do() -> None:
    auth = WebhookAuth(token="s3cret")
    for header in ("Bearer s3cret", "bearer s3cret", "  BEARER   s3cret  "):
        assert auth.allows(header) and bearer(header) == "s3cret"
    refused: tuple[str | None, ...] = ("Bearer ", "Bearer s3cre", "s3cret", "", None)
    for wrong in refused:
        assert not auth.allows(wrong)
    assert not WebhookAuth().allows("Bearer s3cret")  # nothing configured: nobody
