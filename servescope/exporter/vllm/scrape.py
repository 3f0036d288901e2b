"""Fetch one endpoint's /metrics: bounded in time and size, every failure named by a reason."""

from __future__ import annotations

from typing import Protocol

from servescope.core.errors import ServescopeError
from servescope.exporter.sources.base import SourceError
from servescope.exporter.sources.bounded_http import BoundedClient

# 60 times a real vLLM page (50-70 KB); a page parses into about 10 times its size in objects, so the
# cap, with one large page at a time (sources/bounded_http.py), is what the DaemonSet's limit is sized on.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
ACCEPT = "text/plain;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.8,*/*;q=0.1"


class ScrapeError(ServescopeError):
    """`reason` is one of connect, timeout, http_status, too_large, parse."""

    reason = "scrape_failed"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, reason=reason)
        self.message = message


class Fetcher(Protocol):
    """What the vLLM source needs of a scraper: the /metrics text of a URL, or ScrapeError."""

    def fetch(self, url: str) -> str: ...

    def close(self) -> None: ...


class Scraper:
    """One shared HTTP client; thread-safe, so endpoints are fetched in parallel. `timeout` is the total
    time one fetch may take, however the peer paces its bytes."""

    def __init__(self, timeout: float = 2.0, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._client = BoundedClient(timeout=timeout, max_bytes=max_bytes, headers={"Accept": ACCEPT})

    def fetch(self, url: str) -> str:
        try:
            body = self._client.get(url)
        except SourceError as exc:
            raise ScrapeError(exc.reason, exc.message) from None
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScrapeError("parse", f"{url}: body is not UTF-8 text (byte {exc.start})") from None

    def close(self) -> None:
        self._client.close()
