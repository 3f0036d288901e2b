"""Which hosts a read step may ask: the configured exporter, or an alert's `instance` the service trusts.

An `instance` label is untrusted text. With --exporter-per-instance it is asked only when it is a target
Prometheus scrapes as the exporter job (`up{job=...}`, remembered for `TARGETS_TTL` seconds) or an
--exporter-allow entry (a CIDR or a host pattern) names it; link-local and cloud metadata addresses are
refused whatever is configured, before any connection. Each refusal is counted by reason.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
import threading
import time

from prometheus_client import CollectorRegistry, Counter

from servescope.runbooks.actions.base import ActionError, RunContext
from servescope.runbooks.actions.fetch import request
from servescope.runbooks.actions.promql import promql_string

TARGETS_TTL = 30.0
FAILURE_TTL = 5.0
METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
_PATTERN = re.compile(r"[A-Za-z0-9*?.-]{1,253}")
REGISTRY = CollectorRegistry()
REFUSED = Counter(
    "servescope_runbook_instance_refused",
    "Read steps refused because the alert's instance is not a host the service trusts, by reason.",
    ["reason"],
    registry=REGISTRY,
)


class RefusedTargetError(ActionError):
    """An instance the service does not ask; `reason` is the counter's label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.refusal = reason
        REFUSED.labels(reason).inc()


def allow_entry(entry: str) -> str:
    """An --exporter-allow entry checked: a CIDR, or a host pattern of letters, digits, `.-*?`."""
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        if _PATTERN.fullmatch(entry) is None:
            raise ValueError(f"{entry!r}: neither a CIDR nor a host pattern") from None
    return entry


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _link_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return any(address in network for network in _LINK_LOCAL)


def _allowed(host: str, entries: tuple[str, ...]) -> bool:
    address = _address(host)
    for entry in entries:
        try:
            if address is not None and address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            if address is None and fnmatch.fnmatchcase(host.lower(), entry.lower()):
                return True
    return False


class _Targets:
    """Prometheus' instances of one job, asked at most once per TTL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The instances, or why Prometheus could not say (remembered a while too: the step workers
        # would otherwise wait their turn on a slow Prometheus, one deadline each).
        self._cache: dict[tuple[str, str], tuple[float, frozenset[str] | str]] = {}

    def of(self, ctx: RunContext) -> frozenset[str]:
        assert ctx.prometheus_url is not None
        key = (ctx.prometheus_url, ctx.exporter_job)
        with self._lock:
            found = self._cache.get(key)
            if found is None or found[0] <= time.monotonic():
                answer = self._ask(ctx)
                ttl = TARGETS_TTL if isinstance(answer, frozenset) else FAILURE_TTL
                found = self._cache[key] = (time.monotonic() + ttl, answer)
        if isinstance(found[1], str):
            raise RefusedTargetError("targets_unknown", found[1])
        return found[1]

    @staticmethod
    def _ask(ctx: RunContext) -> frozenset[str] | str:
        query = "up{job=%s}" % promql_string(ctx.exporter_job)  # noqa: UP031 (PromQL braces)
        url = str(ctx.prometheus_url).rstrip("/") + "/api/v1/query"
        try:
            answer = request("GET", url, params={"query": query}, timeout=ctx.timeout_seconds).json()
            rows = answer["data"]["result"]
            return frozenset(str(row["metric"]["instance"]) for row in rows if "instance" in row["metric"])
        except Exception as exc:  # fail closed: no list of targets, no instance asked
            return f"cannot ask Prometheus {url} for the exporter's targets: {exc}"


TARGETS = _Targets()


def _resolves_link_local(host: str) -> bool:
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False  # the request itself will say it cannot reach the host
    return any(_link_local(ipaddress.ip_address(str(row[4][0]).split("%")[0])) for row in found)


def check_instance(ctx: RunContext, instance: str) -> None:
    """Nothing when read steps may ask `instance` (host:port); RefusedTargetError says why not."""
    host = instance.rsplit(":", 1)[0]
    address = _address(host)
    if host.lower().rstrip(".") in METADATA_NAMES or (address is not None and _link_local(address)):
        raise RefusedTargetError(
            "link_local", f"instance {instance!r}: a link-local or metadata address is never asked"
        )
    trusted = _allowed(host, ctx.exporter_allow)
    if not trusted and ctx.prometheus_url:
        trusted = instance in TARGETS.of(ctx)
    if not trusted:
        where = f"Prometheus {ctx.prometheus_url}" if ctx.prometheus_url else "no --prometheus-url"
        raise RefusedTargetError(
            "untrusted",
            f"instance {instance!r} is not a target of job {ctx.exporter_job!r} ({where}) nor in "
            "--exporter-allow: not asked",
        )
    if address is None and _resolves_link_local(host):
        raise RefusedTargetError("link_local", f"instance {instance!r} resolves to a link-local address")
