"""The bounded pool step runs take their threads from, apart from the pool of the quick routes.

A step may wait on a slow peer for its whole deadline; running it on the server's shared thread pool
would queue /healthz, the pages and the webhook behind it. Here at most `workers` run at once and at
most `waiting` more wait; past that a run is refused (PoolBusyError, answered 503) instead of queued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from servescope.core.errors import ServescopeError

T = TypeVar("T")


class PoolBusyError(ServescopeError, RuntimeError):
    """Every worker busy and the waiting line full."""

    reason = "pool_busy"


class StepPool:
    """`await pool.run(function, *args)`: the function on one of `workers` threads of its own."""

    def __init__(self, workers: int = 8, waiting: int = 32) -> None:
        if workers < 1 or waiting < 0:
            raise ValueError("workers must be at least 1 and waiting at least 0")
        self.workers, self.waiting = workers, waiting
        self.admitted = 0
        self._limiter: anyio.CapacityLimiter | None = None  # made in the event loop, on first use

    async def run(self, function: Callable[..., T], *args: object) -> T:
        if self.admitted >= self.workers + self.waiting:
            raise PoolBusyError(
                f"{self.workers} step runs running and {self.waiting} waiting; retry in a moment"
            )
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.workers)
        self.admitted += 1
        try:
            return await anyio.to_thread.run_sync(function, *args, limiter=self._limiter)
        finally:
            self.admitted -= 1
