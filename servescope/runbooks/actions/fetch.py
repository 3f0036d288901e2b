"""Every HTTP request of a step: within one total deadline, its answer capped while it streams in.

A per-read timeout never fires against a peer that sends one byte a second; here the deadline covers
the whole exchange (connect, headers, body) and is checked as every chunk arrives, and the body is
refused as soon as it passes the cap (decoded bytes are counted, so a gzip bomb stops at the cap too):
nothing is downloaded first and measured after.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from servescope.runbooks.actions.base import ActionError, http

# A full 8-GPU node's /metrics is well under 1 MiB; the 12 step workers reading 8 MiB each fit the pod.
MAX_ANSWER_BYTES = 8 * 2**20


class AnswerError(ActionError):
    """An answer refused: past the deadline or over the cap; the message names the URL and the bound."""


@dataclass(frozen=True)
class Answer:
    """A whole answer, read within its bounds."""

    url: str
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def _read(response: httpx.Response, url: str, deadline: float, timeout: float, max_bytes: int) -> bytes:
    late = AnswerError(f"{url}: no whole answer within {timeout:g}s (total deadline)")
    body = bytearray()
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise AnswerError(f"{url}: answer larger than {max_bytes} bytes: refused at the cap")
            if time.monotonic() > deadline:
                raise late
    except httpx.ReadTimeout:
        raise late from None
    return bytes(body)


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    params: dict[str, str] | None = None,
    body: Any = None,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Answer:
    """The answer to one request, all of it within `timeout` seconds and `max_bytes` (AnswerError
    otherwise); httpx.TransportError when the peer cannot be reached."""
    deadline = time.monotonic() + timeout
    with http().stream(method, url, params=params, json=body, timeout=httpx.Timeout(timeout)) as response:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AnswerError(f"{url}: no answer within {timeout:g}s (total deadline)")
        # The body's reads wait at most what is left of the deadline, not a whole timeout each.
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = remaining
        content = _read(response, url, deadline, timeout, max_bytes)
        return Answer(str(response.url), response.status_code, content)
