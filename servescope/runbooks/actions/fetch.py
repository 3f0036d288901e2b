"""Every HTTP request of a step, through the one bounded client (`core/http_client.py`).

One total deadline covers the whole exchange (connect, the response head, the body), checked at every
socket operation, so a peer trickling a byte a second is cut off at the deadline; the answer's decoded
size is counted as it is decoded, so a compressed bomb stops at the cap; no redirect is followed, and
no request goes to a link-local, metadata or loopback-mapped address, however it is written or whatever
a name resolves to (`core/addresses.py`).
"""

from __future__ import annotations

import functools
from typing import Any

from servescope.core.addresses import address_policy
from servescope.core.decoding import FetchError
from servescope.core.http_client import Answer, BoundedClient
from servescope.runbooks.actions.base import ActionError

# A full 8-GPU node's /metrics is well under 1 MiB; the 12 step workers reading 8 MiB each fit the pod.
MAX_ANSWER_BYTES = 8 * 2**20

__all__ = ["MAX_ANSWER_BYTES", "Answer", "AnswerError", "UnreachableError", "request"]


class AnswerError(ActionError):
    """An answer refused: past the deadline, over the cap, or in an encoding not accepted; the message
    names the URL and the bound."""

    reason = "answer_refused"


class UnreachableError(ActionError):
    """The peer could not be reached (refused, unresolvable, closed) or its address is never asked."""

    reason = "unreachable"


@functools.cache
def _client() -> BoundedClient:
    """One client for the process: its TLS context and connection pool are built once."""
    return BoundedClient(timeout=10.0, max_bytes=MAX_ANSWER_BYTES, address_policy=address_policy)


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    params: dict[str, str] | None = None,
    body: Any = None,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Answer:
    """The answer to one request, all of it within `timeout` seconds and `max_bytes` decoded bytes;
    AnswerError past a bound, UnreachableError when the peer cannot be reached."""
    try:
        return _client().request(method, url, params=params, json=body, timeout=timeout, max_bytes=max_bytes)
    except FetchError as exc:
        if exc.reason in ("connect", "refused"):
            raise UnreachableError(str(exc)) from None
        raise AnswerError(str(exc)) from None
