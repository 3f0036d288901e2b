"""An HTTP body decoded while it streams in, its size counted on the decoded bytes as they are produced.

A compressed answer is inflated in steps that never produce more than one chunk at a time, and every
layer's output is counted against the cap (an answer compressed twice, `Content-Encoding: gzip, gzip`,
is two layers): a bomb stops at the cap, never inflates past it. The encodings decoded are the ones a
client of servescope asks for (gzip, deflate); any other (br, zstd, compress) is refused before a byte
of it is decoded: none of servescope's peers needs one, and a decoder servescope does not bound is a
decoder a hostile peer chooses.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Literal

from servescope.core.errors import ServescopeError

# `refused`: the address policy refused every address of the host (core/addresses.py).
Reason = Literal["connect", "timeout", "http_status", "too_large", "parse", "refused"]
CHUNK = 64 * 1024
_GZIP, _ZLIB, _RAW_DEFLATE = 31, 15, -15
DECODED = frozenset({"gzip", "x-gzip", "deflate"})
IDENTITY = frozenset({"", "identity"})


class FetchError(ServescopeError):
    """A request that did not get a whole, bounded answer; `reason` is a short word for metrics."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def encodings(values: list[str]) -> list[str]:
    """The Content-Encoding header lines as the list of codings applied, first applied first."""
    found = [part.strip().lower() for value in values for part in value.split(",")]
    return [coding for coding in found if coding not in IDENTITY]


def _is_zlib(head: bytes) -> bool:
    """A zlib stream starts with a CMF/FLG pair whose value is a multiple of 31 (RFC 1950)."""
    return len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0


class _Layer:
    """One coding's decoder; concatenated gzip members (valid gzip) are decoded one after another."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._inflate: zlib._Decompress | None = None
        self.produced = 0

    def _start(self, data: bytes) -> zlib._Decompress:
        if self.coding == "deflate":
            # HTTP's deflate is a zlib stream, but some servers send raw deflate: tell them apart.
            return zlib.decompressobj(_ZLIB if _is_zlib(data) else _RAW_DEFLATE)
        return zlib.decompressobj(_GZIP)

    def decode(self, data: bytes, emit: Callable[[bytes], None], cap: int) -> None:
        pending = data
        while pending:
            if self._inflate is None or self._inflate.eof:
                if self._inflate is not None and (self.coding == "deflate" or not pending.strip(b"\0")):
                    return  # padding after the stream's end
                self._inflate = self._start(pending)  # the first, or the next gzip member
            out = self._inflate.decompress(pending, CHUNK)
            pending = self._inflate.unconsumed_tail or (
                self._inflate.unused_data if self._inflate.eof else b""
            )
            if out:
                self.produced += len(out)
                if self.produced > cap:
                    raise FetchError("too_large", f"decoded body larger than {cap} bytes: refused at the cap")
                emit(out)

    def finished(self) -> bool:
        return self._inflate is None or self._inflate.eof


class CappedBody:
    """Accumulates a body of `codings` (in the order they were applied), refusing it past `max_bytes`
    of decoded data; `on_grow(size)` is called before the body grows to `size` bytes."""

    def __init__(
        self, url: str, max_bytes: int, codings: list[str], on_grow: Callable[[int], None] | None = None
    ) -> None:
        unknown = [coding for coding in codings if coding not in DECODED]
        if unknown:
            raise FetchError(
                "parse", f"{url}: Content-Encoding {', '.join(unknown)} not accepted (gzip, deflate only)"
            )
        self._url = url
        self._max = max_bytes
        self._layers = [_Layer(coding) for coding in reversed(codings)]
        self._on_grow = on_grow
        self.data = bytearray()

    def feed(self, raw: bytes) -> None:
        try:
            self._into(0, raw)
        except zlib.error as exc:
            raise FetchError("parse", f"{self._url}: cannot decode the body: {exc}") from None
        except FetchError as exc:
            raise FetchError(exc.reason, f"{self._url}: {exc}") from None

    def _into(self, level: int, data: bytes) -> None:
        if level == len(self._layers):
            self._grow(data)
            return
        self._layers[level].decode(data, lambda out: self._into(level + 1, out), self._max)

    def finish(self) -> bytearray:
        if not all(layer.finished() for layer in self._layers):
            raise FetchError("parse", f"{self._url}: the compressed body ended early")
        return self.data  # not copied: a body near the cap is held once

    def _grow(self, data: bytes) -> None:
        size = len(self.data) + len(data)
        if size > self._max:
            raise FetchError("too_large", f"answer larger than {self._max} bytes: refused at the cap")
        if self._on_grow is not None:
            self._on_grow(size)
        self.data += data
