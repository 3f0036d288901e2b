"""One API-server process's listening ports, and where each may be reached from this exporter.

Sockets are read in the process's own network namespace (`<pid>/net/tcp`, `tcp6`), and only those the
process holds (its `fd/`) count. A port is reached as the pod reaches it: at the addresses of the pod's
default-route interface (addresses.py), in the family the listener accepts. `0.0.0.0` accepts IPv4, a
lone `[::]` IPv6 and (unless IPV6_V6ONLY) IPv4 too, so it is tried on IPv6 first; `[::]` beside
`0.0.0.0` on the same port is V6ONLY and the pair takes both, IPv4 first. What cannot be reached is
decided here when it needs no probe (loopback only, no address, ptrace denied, nothing listening).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from servescope.core.vllm.reach import (
    LOOPBACK_ONLY,
    NO_LISTENER,
    NO_REACHABLE_ADDRESS,
    NOT_AN_ENGINE,
    PTRACE_DENIED,
    SCRAPED,
)
from servescope.exporter.vllm.addresses import PodAddresses, pod_addresses
from servescope.exporter.vllm.procfs import ProcFs

_V4_ANY, _V6_ANY = "0.0.0.0", "::"
MAX_ADDRESSES = 4  # tried per port, preferred first: a pod with many interfaces is not swept


@dataclass(frozen=True, slots=True)
class Outcome:
    """What discovery came to for a GPU process or a port: a reason and what it refers to."""

    reason: str
    detail: str

    @property
    def failed(self) -> bool:
        return self.reason not in (SCRAPED, NOT_AN_ENGINE)

    @staticmethod
    def not_an_engine(pid: int) -> Outcome:
        return Outcome(NOT_AN_ENGINE, f"pid {pid} runs no serving engine")


@dataclass(eq=False)
class Candidate:
    """One listening port of an engine's API server (or why the server has none to offer)."""

    key: tuple[str, int]  # (network namespace, port): a listener the API processes may share
    port: int
    hosts: list[str]  # where to try it, preferred first (empty: `static` says why)
    where: str  # the namespace and what listens, for messages
    lone_v6_wildcard: bool = False  # only [::] on the port: an IPv4 refusal means IPV6_V6ONLY
    static: Outcome | None = None  # decided without a probe
    api_pids: set[int] = field(default_factory=set)
    gpu_pids: set[int] = field(default_factory=set)
    result: Outcome | None = None  # after probing: SCRAPED (detail: the URL) or why not

    def url(self, host: str) -> str:
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/metrics"

    def who(self) -> str:
        return f"pid {', '.join(map(str, sorted(self.api_pids)))}"


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _own_hosts(addresses: list[str]) -> list[str]:
    """In this exporter's own network namespace: loopback for wildcards, else the address itself."""
    hosts = ["127.0.0.1"] if _V4_ANY in addresses else []
    if _V6_ANY in addresses:
        hosts += ["::1", "127.0.0.1"] if _V4_ANY not in addresses else ["::1"]
    return [*hosts, *(a for a in addresses if a not in (_V4_ANY, _V6_ANY))]


def _pod_hosts(addresses: list[str], pod: PodAddresses) -> list[str]:
    """In another network namespace: the pod's addresses in the families the listeners accept."""
    v4_any, v6_any = _V4_ANY in addresses, _V6_ANY in addresses
    if v6_any and not v4_any:
        hosts = [*pod.v6, *pod.v4]  # a lone [::] takes IPv6 for certain, IPv4 unless V6ONLY
    else:
        hosts = [*(pod.v4 if v4_any else []), *(pod.v6 if v6_any else [])]
    hosts += [a for a in addresses if a not in (_V4_ANY, _V6_ANY) and not _loopback(a)]
    return list(dict.fromkeys(hosts))[:MAX_ADDRESSES]


def _shown(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def candidates_of(procfs: ProcFs, pid: int, port_flag: int | None, own: str | None) -> list[Candidate]:
    """The ports `pid` listens on (only `port_flag`'s when it is one of them), each with where to try it."""
    if procfs.access_denied(pid):
        detail = f"pid {pid}: its fd/ and ns/net are not readable here (ptrace read access denied)"
        return [Candidate((f"pid {pid}", 0), 0, [], "", static=Outcome(PTRACE_DENIED, detail))]
    theirs = procfs.netns(pid)
    same = theirs is None or own is None or theirs == own
    listeners = procfs.listeners(pid)
    held = [listeners[i] for i in sorted(procfs.socket_inodes(pid) & listeners.keys())]
    if port_flag is not None and any(x.port == port_flag for x in held):
        held = [x for x in held if x.port == port_flag]
    if not held:
        detail = f"pid {pid} (an engine's API server) listens on no TCP port yet"
        return [Candidate((f"pid {pid}", 0), 0, [], "", static=Outcome(NO_LISTENER, detail))]
    by_port: dict[int, list[str]] = {}
    for listener in held:
        by_port.setdefault(listener.port, []).append(listener.address)
    pod: PodAddresses | None = None
    found = []
    for port, bound in sorted(by_port.items()):
        addresses = sorted(set(bound))
        where = f"network namespace {theirs} listens on {', '.join(_shown(a, port) for a in addresses)}"
        lone_v6 = _V6_ANY in addresses and _V4_ANY not in addresses
        candidate = Candidate((theirs or "own", port), port, [], where, lone_v6)
        if same:
            candidate.hosts = _own_hosts(addresses)
        elif all(_loopback(a) for a in addresses):
            candidate.static = Outcome(LOOPBACK_ONLY, f"in {where} only")
        else:
            pod = pod or pod_addresses(procfs, pid)
            candidate.hosts = _pod_hosts(addresses, pod)
            if not candidate.hosts:
                has = ", ".join([*pod.v4, *pod.v6]) or "no address but loopback"
                candidate.static = Outcome(NO_REACHABLE_ADDRESS, f"in {where}; the pod has {has}")
        found.append(candidate)
    return found
