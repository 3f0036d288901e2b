"""Fetch one endpoint's /metrics: bounded in time and size, every failure named by a reason."""

from __future__ import annotations

from typing import Protocol

import httpx

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
ACCEPT = "text/plain;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.8,*/*;q=0.1"


class ScrapeError(Exception):
    """`reason` is one of connect, timeout, http_status, too_large, parse."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _ClosedBeforeAnswerError(Exception):
    """The connection closed before any of the response arrived; the httpx error is its __cause__."""


class Fetcher(Protocol):
    """What the vLLM source needs of a scraper: the /metrics text of a URL, or ScrapeError."""

    def fetch(self, url: str) -> str: ...

    def close(self) -> None: ...


class Scraper:
    """One shared HTTP client; thread-safe, so endpoints are fetched in parallel."""

    def __init__(self, timeout: float = 2.0, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._client = httpx.Client(
            timeout=timeout, follow_redirects=False, headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}
        )

    def fetch(self, url: str) -> str:
        try:
            return self._fetch_once(url)
        except _ClosedBeforeAnswerError:
            # The server closed a pooled keep-alive connection as the request went out: uvicorn (and
            # so vLLM) closes idle connections after 5 s, the default scrape interval. Nothing was
            # received, a GET is safe to repeat, and a new connection is opened for it.
            try:
                return self._fetch_once(url)
            except _ClosedBeforeAnswerError as exc:
                raise ScrapeError("connect", f"{url}: {exc.__cause__}") from None

    def _fetch_once(self, url: str) -> str:
        answered = False
        try:
            with self._client.stream("GET", url) as response:
                answered = True
                if response.status_code != 200:
                    raise ScrapeError("http_status", f"{url} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise ScrapeError(
                        "too_large", f"{url}: {declared} bytes declared, limit {self.max_bytes}"
                    )
                body = bytearray()
                # iter_bytes decompresses gzip: the cap applies to what we would parse (no gzip bombs).
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise ScrapeError("too_large", f"{url}: body larger than {self.max_bytes} bytes")
        except httpx.TimeoutException:
            raise ScrapeError("timeout", f"{url}: no complete answer within the timeout") from None
        except httpx.DecodingError as exc:
            raise ScrapeError("parse", f"{url}: cannot decode the body: {exc}") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if not answered:
                raise _ClosedBeforeAnswerError from exc
            raise ScrapeError("connect", f"{url}: {exc}") from None
        except httpx.HTTPError as exc:
            raise ScrapeError("connect", f"{url}: {exc}") from None
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScrapeError("parse", f"{url}: body is not UTF-8 text (byte {exc.start})") from None

    def close(self) -> None:
        self._client.close()
