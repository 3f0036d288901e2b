"""Requests the runbook service refused without acting: counted, and logged at a bounded rate.

A refused request (no token, a wrong one, a malformed call nobody authenticated, a read step asking an
instance the service does not trust) is not an audit record: anyone who can reach the service can make
one, and the trail must not be theirs to fill. Each is counted by reason in
`servescope_runbook_refused_requests_total` (on /incidents/metrics), and logged at most once per
LOG_INTERVAL seconds per reason, with how many were refused since the last line.
"""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client import CollectorRegistry, Counter

LOG_INTERVAL = 10.0
REGISTRY = CollectorRegistry()
REFUSED = Counter(
    "servescope_runbook_refused_requests",
    "Requests refused before anything ran (refused_no_token, refused_bad_token, refused_not_configured, "
    "malformed, unknown_step, refused_busy, too_large, refused_target), by reason.",
    ["reason"],
    registry=REGISTRY,
)
log = logging.getLogger("servescope.runbooks.refused")


class _RateLimited:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def note(self, reason: str, detail: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._since[reason] = self._since.get(reason, 0) + 1
            if now - self._last.get(reason, -LOG_INTERVAL) < LOG_INTERVAL:
                return
            count, self._since[reason], self._last[reason] = self._since[reason], 0, now
        log.warning(
            "refused %d request(s) (%s) in the last %gs; latest: %s",
            count,
            reason,
            LOG_INTERVAL,
            detail[:300],
        )


_LOG = _RateLimited()


def refused(reason: str, detail: str) -> None:
    """Count a refused request and log it (rate-limited)."""
    REFUSED.labels(reason).inc()
    _LOG.note(reason, detail)
