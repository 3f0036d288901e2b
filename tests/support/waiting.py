"""Waiting on a condition, not on the clock: poll until it holds, fail naming what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 2.0) -> T:
    """The first truthy answer of `probe` (an HTTP error counts as none yet); AssertionError naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
