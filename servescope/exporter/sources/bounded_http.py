"""The bounded GET the scraping sources share: the common bounded client, its errors as SourceError.

The deadline, the decoded-size cap and the decoding are `core/http_client.py`'s. What is the
exporter's own is the memory budget of parallel scrapes: a body beyond SMALL_BODY_BYTES needs the
process's one large-body slot, so however many endpoints answer at once, at most one large page is held
(and parsed, by callers holding `hold()`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from servescope.core.decoding import FetchError
from servescope.core.http_client import BoundedClient as _Client
from servescope.core.http_client import seconds_left
from servescope.exporter.sources.base import SourceError

# Real engine pages are 50-70 KB and a dcgm-exporter page for 8 GPUs about as much: ordinary pages never
# wait for the slot. A page parses into about 10 times its size, so 8 parallel small ones stay near 20 MiB.
SMALL_BODY_BYTES = 256 * 1024
# The common client's reasons, as the sources' health counts them (an address refused by a policy: the
# scraping sources set none, so it never happens; counted as a failed connection if it did).
_REASONS = {"refused": "connect"}


class LargeBodies:
    """At most `slots` bodies beyond SMALL_BODY_BYTES in the process at once; the others wait (within
    their deadline) so parallel scrapes never hold more than `slots` large pages."""

    def __init__(self, slots: int = 1) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        self._local = threading.local()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """A slot taken inside stays taken until the outermost `hold` of this thread ends."""
        depth: int = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0 and getattr(self._local, "held", False):
                self._local.held = False
                self._slots.release()

    def admit(self, url: str) -> None:
        """Take the slot for a body growing past SMALL_BODY_BYTES; 'timeout' when not had in time."""
        if getattr(self._local, "held", False):
            return
        if not self._slots.acquire(timeout=seconds_left() or 0.0):
            raise SourceError(
                "timeout", f"{url}: another large body held the memory budget past the deadline"
            )
        self._local.held = True


LARGE_BODIES = LargeBodies()


class BoundedClient:
    """Thread-safe GETs, each within `timeout` seconds in total and `max_bytes` of (decoded) body."""

    def __init__(self, *, timeout: float, max_bytes: int, headers: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._client = _Client(timeout=timeout, max_bytes=max_bytes, headers=headers)

    def get(self, url: str) -> bytearray:
        """The body of a 200 answer; SourceError with reason connect, timeout, http_status, too_large
        or parse otherwise."""

        def admit(size: int) -> None:
            if size > SMALL_BODY_BYTES:
                LARGE_BODIES.admit(url)

        with LARGE_BODIES.hold():
            try:
                return self._client.get(url, on_grow=admit)
            except FetchError as exc:
                raise SourceError(_REASONS.get(exc.reason, exc.reason), str(exc)) from None

    def close(self) -> None:
        self._client.close()
