"""The one token check of the runbook service: change steps and the webhook read a header the same way."""

from __future__ import annotations

import pytest

from servescope.runbooks.auth import ChangeTokens, WebhookAuth, bearer, caller_host, refusal, trusted_networks


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


def test_why_a_change_step_is_refused_and_who_a_good_token_is() -> None:
    tokens = ChangeTokens((("alice", "s3cret"), ("bob", "an0ther")))
    assert refusal(None, "anything") == ("refused_not_configured", None)
    assert refusal(tokens, None) == ("refused_no_token", None)
    assert refusal(tokens, "s3cre") == ("refused_bad_token", None)
    assert refusal(tokens, "s3cret\udcff") == (
        "refused_bad_token",
        None,
    )  # not valid text: no crash, no match
    assert refusal(tokens, "s3cret") == (None, "alice")
    assert refusal(tokens, "an0ther") == (None, "bob")


TRUSTED = trusted_networks(["10.0.0.0/8", "192.0.2.7"])


@pytest.mark.parametrize(
    ("peer", "headers", "caller"),
    [
        ("203.0.113.9", ["198.51.100.1"], "203.0.113.9"),  # not a proxy: its header is ignored
        ("10.1.1.1", ["198.51.100.1"], "198.51.100.1"),
        # HAProxy's option forwardfor appends its own line: the client's forged one comes first.
        ("10.1.1.1", ["6.6.6.6", "198.51.100.1"], "198.51.100.1"),
        ("10.1.1.1", ["6.6.6.6, 198.51.100.1, 192.0.2.7"], "198.51.100.1"),  # trusted hops are skipped
        ("10.1.1.1", ["not-an-ip"], "10.1.1.1 (X-Forwarded-For entry 'not-an-ip' is not an address)"),
        ("10.1.1.1", ["10.2.2.2"], "10.2.2.2"),  # only trusted hops: the leftmost of them
        ("10.1.1.1", [], "10.1.1.1"),
    ],
)
def test_the_client_behind_trusted_proxies_is_the_rightmost_untrusted_address(
    peer: str, headers: list[str], caller: str
) -> None:
    assert caller_host(peer, headers, TRUSTED) == caller


def test_the_webhook_reads_the_header_as_change_steps_do() -> None:
    auth = WebhookAuth(token="s3cret")
    for header in ("Bearer s3cret", "bearer s3cret", "  BEARER   s3cret  "):
        assert auth.allows(header) and bearer(header) == "s3cret"
    refused: tuple[str | None, ...] = ("Bearer ", "Bearer s3cre", "s3cret", "", None)
    for wrong in refused:
        assert not auth.allows(wrong)
    assert not WebhookAuth().allows("Bearer s3cret")  # nothing configured: nobody
