"""Prometheus remote write (protocol 1.0): samples POSTed as a snappy-compressed protobuf WriteRequest.

Why remote write for the weekly job's result: the job lives a few minutes a week, so nothing could
scrape it (and a Pushgateway would be one more service to run and to keep alive, which re-exposes the
last value forever with the push time lost); a node-exporter textfile ties the result to whichever node
the pod ran on. Remote write stores each result once, at the time it was measured, in the Prometheus
that already receives servescope's agent (kube-prometheus-stack with its remote-write receiver on),
so the knee over weeks is one point per run and the alert reads the latest with last_over_time.

The encoding is written out here (it is small): WriteRequest{timeseries=1: TimeSeries{labels=1:
Label{name=1, value=2}, samples=2: Sample{value=1 (double), timestamp=2 (int64 ms)}}}, compressed with
snappy's block format using literal elements only (valid snappy that any decoder reads).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
MAX_LITERAL = 1 << 16


@dataclass(frozen=True, slots=True)
class Series:
    """One sample of one series: its name, labels, value and time (Unix milliseconds)."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp_ms: int

    def __post_init__(self) -> None:
        if not METRIC_NAME.match(self.name) or not all(LABEL_NAME.match(k) for k in self.labels):
            raise ValueError(f"{self.name}{dict(self.labels)}: not a valid metric or label name")


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode(series: Sequence[Series]) -> bytes:
    """The protobuf WriteRequest of `series` (labels sorted by name, __name__ among them)."""
    request = bytearray()
    for one in series:
        labels = sorted({**one.labels, "__name__": one.name}.items())
        body = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in labels)
        sample = (
            _varint(1 << 3 | 1)
            + struct.pack("<d", one.value)
            + _varint(2 << 3 | 0)
            + _varint(one.timestamp_ms)
        )
        request += _field(1, body + _field(2, sample))
    return bytes(request)


def snappy(data: bytes) -> bytes:
    """`data` in snappy's block format, as literal elements only."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), MAX_LITERAL):
        chunk = data[start : start + MAX_LITERAL]
        size = len(chunk) - 1
        if size < 60:
            out.append(size << 2)
        else:
            width = (size.bit_length() + 7) // 8
            out.append((59 + width) << 2)
            out += size.to_bytes(width, "little")
        out += chunk
    return bytes(out)


def push(url: str, series: Sequence[Series], timeout_s: float = 30.0) -> None:
    """POST the samples; raises RuntimeError naming the URL and the receiver's answer when refused."""
    headers = {
        "Content-Encoding": "snappy",
        "Content-Type": "application/x-protobuf",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
        "User-Agent": "servescope-capacity",
    }
    try:
        answer = httpx.post(
            url, content=snappy(encode(series)), headers=headers, timeout=timeout_s, trust_env=False
        )
    except httpx.HTTPError as err:
        raise RuntimeError(f"remote write to {url}: {err}") from err
    if answer.status_code // 100 != 2:
        raise RuntimeError(f"remote write to {url}: HTTP {answer.status_code}: {answer.text[:300]}")
