"""Probing discovery's candidates: a TCP connect to each address in turn, then GET /metrics where one
connects, and the outcome of every GPU process from what its engine's ports came to.

The connect sends nothing; its error says why an address cannot be reached (refused: nothing listens
there for that family, which for a lone `[::]` listener refusing IPv4 means IPV6_V6ONLY; unreachable:
this exporter has no route, typically no IPv6; timeout). Only a port that connects is asked for
/metrics, and only ports of engine API servers are ever connected to.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable

from servescope.core.vllm.reach import IPV6_ONLY, NO_REACHABLE_ADDRESS, NOT_METRICS, SCRAPED, V6ONLY_LISTENER
from servescope.exporter.vllm.discovery import Discovery
from servescope.exporter.vllm.listening import Candidate, Outcome

CONNECT_SECONDS = 1.0
REFUSED, UNREACHABLE, TIMEOUT = "refused", "unreachable", "timeout"
_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT}
Connect = Callable[[str, int], str | None]
Answer = Callable[[str], str | None]  # URL -> None when it serves an engine's /metrics, else why not


def tcp_connect(host: str, port: int) -> str | None:
    """None when a TCP connection to host:port opens (and is closed at once, no byte sent), else why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_SECONDS)
            sock.connect((host, port))
    except ConnectionRefusedError:
        return REFUSED
    except TimeoutError:
        return TIMEOUT
    except OSError as exc:
        return UNREACHABLE if exc.errno in _UNREACHABLE else f"error {exc.strerror or exc}"
    return None


def _failure(candidate: Candidate, tried: list[tuple[str, str]]) -> Outcome:
    """Why none of the port's addresses could be reached, from how each failed."""
    shown = ", ".join(f"{candidate.url(host)} ({why})" for host, why in tried)
    detail = f"{candidate.who()} in {candidate.where}; tried {shown}"
    v4_refused = any(why == REFUSED and ":" not in host for host, why in tried)
    v6_refused = any(why == REFUSED and ":" in host for host, why in tried)
    if candidate.lone_v6_wildcard and v4_refused and not v6_refused:
        return Outcome(V6ONLY_LISTENER, f"{detail}: [::] refuses IPv4 (IPV6_V6ONLY), IPv6 not reachable")
    if tried and all(":" in host and why != REFUSED for host, why in tried):
        return Outcome(IPV6_ONLY, f"{detail}: only IPv6 addresses, and no IPv6 route from this exporter")
    return Outcome(NO_REACHABLE_ADDRESS, detail)


def probe(candidate: Candidate, connect: Connect, answer: Answer) -> Outcome:
    """The candidate's outcome: SCRAPED with the URL that answered, or why none did."""
    if candidate.static is not None:
        if candidate.port == 0:  # the process itself (ptrace denied, no listener): says its pid
            return candidate.static
        return Outcome(candidate.static.reason, f"{candidate.who()} {candidate.static.detail}")
    tried: list[tuple[str, str]] = []
    for host in candidate.hosts:
        why = connect(host, candidate.port)
        if why is not None:
            tried.append((host, why))
            continue
        url = candidate.url(host)
        wrong = answer(url)
        if wrong is None:
            return Outcome(SCRAPED, url)
        return Outcome(NOT_METRICS, f"{candidate.who()} in {candidate.where}: {url} {wrong}")
    return _failure(candidate, tried)


def settle(found: Discovery, connect: Connect, answer: Answer) -> Discovery:
    """Probe every candidate; each GPU process behind one is scraped when any of its ports answered,
    else takes the first failure among them."""
    for candidate in found.candidates:
        candidate.result = probe(candidate, connect, answer)
        if candidate.result.reason == SCRAPED:
            owners = found.owners.setdefault(candidate.result.detail, set())
            owners.update(candidate.api_pids, candidate.gpu_pids)
    for gpu_pid in found.gpu_pids:
        if gpu_pid in found.outcomes:
            continue
        results = [c.result for c in found.candidates if gpu_pid in c.gpu_pids and c.result is not None]
        scraped = [r for r in results if r.reason == SCRAPED]
        found.outcomes[gpu_pid] = (scraped or results or [Outcome(NO_REACHABLE_ADDRESS, "no candidate")])[0]
    return found
