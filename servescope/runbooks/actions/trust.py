"""Which exporter a read step asks: the one that produced the alert, found through Prometheus' targets.

With --exporter-per-instance an alert's `instance` label names the exporter it came from. On Kubernetes
the ServiceMonitor sets `instance` to the node's name, which is no address: the address is the one
Prometheus scraped, and Prometheus says it (`/api/v1/targets`: each active target of the exporter job,
its `instance` label and the `scrapeUrl` it used). So a step for node-b asks node-b's exporter at the
address Prometheus used, never a load-balanced Service that answers from any node; when the node cannot
be found, the step fails and says which node it wanted. An `instance` written as host:port is asked
when it is such a target's address, or when --exporter-allow names its host (a CIDR, an exact name, a
pattern such as `*.nodes.example`, or `*`). Labels are untrusted text: they only ever select among the
addresses Prometheus or the operator named. Link-local, metadata and loopback-mapped addresses are
refused whatever is configured (`core/addresses.py`), before any connection and at connect time.
Each refusal is counted by reason.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import threading
import time
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter

from servescope.core.addresses import forbidden_host, parse_address
from servescope.runbooks.actions.base import ActionError, RunContext
from servescope.runbooks.actions.fetch import request

TARGETS_TTL = 30.0
FAILURE_TTL = 5.0
_PATTERN = re.compile(r"[A-Za-z0-9*?.-]{1,253}")
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"
                        r":(?P<port>[0-9]{1,5})")  # fmt: skip
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
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
        super().__init__(message, reason=reason)
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


def allowed(host: str, entries: tuple[str, ...]) -> bool:
    """Whether an --exporter-allow entry names `host`: an address within a CIDR, or a name (or an
    address as written) matching a pattern (`*.nodes.example`, `node-b`, `*`), case-insensitively."""
    address = parse_address(host)
    for entry in entries:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            if fnmatch.fnmatchcase(host.strip("[]").lower().rstrip("."), entry.lower().rstrip(".")):
                return True
            continue
        if address is not None and address.version == network.version and address in network:
            return True
    return False


class _Targets:
    """Prometheus' active targets of one job (instance -> scrape base URL), asked at most once per TTL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The targets, or why Prometheus could not say (remembered a while too: the step workers would
        # otherwise each wait a deadline on a slow Prometheus).
        self._cache: dict[tuple[str, str], tuple[float, dict[str, str] | str]] = {}

    def of(self, ctx: RunContext) -> dict[str, str]:
        assert ctx.prometheus_url is not None
        key = (ctx.prometheus_url, ctx.exporter_job)
        with self._lock:
            found = self._cache.get(key)
            if found is None or found[0] <= time.monotonic():
                answer = self._ask(ctx)
                ttl = TARGETS_TTL if isinstance(answer, dict) else FAILURE_TTL
                found = self._cache[key] = (time.monotonic() + ttl, answer)
        if isinstance(found[1], str):
            raise RefusedTargetError("targets_unknown", found[1])
        return found[1]

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()

    @staticmethod
    def _ask(ctx: RunContext) -> dict[str, str] | str:
        url = str(ctx.prometheus_url).rstrip("/") + "/api/v1/targets"
        try:
            answer = request("GET", url, params={"state": "active"}, timeout=ctx.timeout_seconds).json()
            rows = answer["data"]["activeTargets"]
            found: dict[str, str] = {}
            for row in rows:
                labels, scraped = row.get("labels") or {}, urlsplit(str(row.get("scrapeUrl", "")))
                if labels.get("job") != ctx.exporter_job or not scraped.netloc:
                    continue
                base = f"{scraped.scheme}://{scraped.netloc}"
                found[str(labels.get("instance", scraped.netloc))] = base
                found.setdefault(scraped.netloc, base)  # an instance written as the address itself
            return found
        except Exception as exc:  # fail closed: no list of targets, no instance asked
            return f"cannot ask Prometheus {url} for the exporter's targets: {exc}"


TARGETS = _Targets()


def _refuse_forbidden(instance: str, host: str) -> None:
    reason = forbidden_host(host)
    if reason is not None:
        raise RefusedTargetError("link_local", f"instance {instance!r}: {reason}: never asked")


def exporter_base(ctx: RunContext) -> str:
    """The base URL of the exporter read steps ask: the alert's own (ctx.instance), else --exporter-url.

    RefusedTargetError when the alert's exporter cannot be found or is not trusted: the step then says
    which node it wanted rather than asking another one."""
    instance = ctx.instance
    if instance is None:
        return ctx.exporter_url.rstrip("/")
    written = _HOST_PORT.fullmatch(instance)
    _refuse_forbidden(instance, written.group("host") if written else instance)
    configured = urlsplit(ctx.exporter_url)
    if written is not None and allowed(written.group("host"), ctx.exporter_allow):
        return f"{configured.scheme}://{instance}"
    if _NAME.fullmatch(instance) and allowed(instance, ctx.exporter_allow) and configured.port:
        return f"{configured.scheme}://{instance}:{configured.port}"  # a node name: the exporters' port
    if ctx.prometheus_url:
        targets = TARGETS.of(ctx)
        base = targets.get(instance)
        if base is not None:
            _refuse_forbidden(instance, urlsplit(base).hostname or "")
            return base
        where = f"Prometheus {ctx.prometheus_url} has no active target of job {ctx.exporter_job!r} with it"
    else:
        where = "no --prometheus-url to find its address"
    raise RefusedTargetError(
        "untrusted",
        f"the exporter of instance {instance!r} (the node the alert is about) is not known: {where}, and "
        "--exporter-allow does not name it. Not asked: another node's exporter would answer for it.",
    )
