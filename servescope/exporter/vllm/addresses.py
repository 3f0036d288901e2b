"""A pod's own addresses, as its CNI gave them: from the network namespace of one of its processes.

A CNI plugin puts the pod's address on the interface that holds its default route, `eth0` by convention.
A Multus or SR-IOV secondary interface (`net1`) may hold a lower address that this node cannot reach, so
the order matters: the default route's interface first, then addresses on no other interface (Calico's
/32 on `eth0` has no connected route of its own), then the rest. IPv4 comes from `net/fib_trie` (the
local addresses) and `net/route` (which interface's connected subnet holds each), IPv6 from
`net/if_inet6` (addresses by interface) and `net/ipv6_route` (the default route's interface).
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass, field

from servescope.exporter.vllm.procfs import ProcFs

CONVENTIONAL_INTERFACE = "eth0"
_REJECT = 0x0200  # RTF_REJECT: an unreachable route, not a way out
_GATEWAY = 0x0002  # RTF_GATEWAY
_SCOPE_GLOBAL = 0x00  # if_inet6 scope: global (ULA included); link-local and host are not reachable
_UNUSABLE = 0x40 | 0x08  # IFA_F_TENTATIVE (duplicate address detection not done), IFA_F_DADFAILED


@dataclass(frozen=True, slots=True)
class PodAddresses:
    """The addresses of a network namespace, loopback and link-local left out, preferred first."""

    v4: list[str] = field(default_factory=list)
    v6: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.v4 or self.v6)


def _le_ipv4(hex_value: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(bytes.fromhex(hex_value)[::-1])  # net/route prints it little-endian


def _routes_v4(procfs: ProcFs, pid: int | str) -> list[tuple[str, ipaddress.IPv4Network | None, int]]:
    """(interface, connected subnet or None for a default route, metric) from net/route."""
    routes: list[tuple[str, ipaddress.IPv4Network | None, int]] = []
    with contextlib.suppress(OSError):
        for line in procfs.read_text(pid, "net", "route").splitlines()[1:]:
            fields = line.split()
            with contextlib.suppress(ValueError, IndexError):
                iface, dest, flags, metric = fields[0], _le_ipv4(fields[1]), int(fields[3], 16), fields[6]
                mask = _le_ipv4(fields[7])
                if flags & _REJECT:
                    continue
                if int(dest) == 0 and int(mask) == 0:
                    routes.append((iface, None, int(metric)))
                elif not flags & _GATEWAY:
                    routes.append((iface, ipaddress.IPv4Network(f"{dest}/{mask}", strict=False), int(metric)))
    return routes


def _ordered(by_iface: dict[str, list[str]], unowned: list[str], preferred: list[str]) -> list[str]:
    """The preferred interfaces' addresses, then those on no known interface, then every other one."""
    first = [a for iface in preferred for a in by_iface.get(iface, [])]
    rest = [a for iface, held in sorted(by_iface.items()) if iface not in preferred for a in held]
    return list(dict.fromkeys([*first, *unowned, *rest]))


def _default_ifaces(defaults: list[tuple[str, int]]) -> list[str]:
    ifaces = [iface for iface, _ in sorted(defaults, key=lambda item: item[1])]
    return list(dict.fromkeys(ifaces)) or [CONVENTIONAL_INTERFACE]


def ipv4_addresses(procfs: ProcFs, pid: int | str) -> list[str]:
    routes = _routes_v4(procfs, pid)
    preferred = _default_ifaces([(iface, metric) for iface, net, metric in routes if net is None])
    by_iface: dict[str, list[str]] = {}
    unowned: list[str] = []
    for address in procfs.local_addresses(pid):
        ip = ipaddress.IPv4Address(address)
        owners = [iface for iface, net, _ in routes if net is not None and ip in net]
        if owners:
            by_iface.setdefault(owners[0], []).append(address)
        else:
            unowned.append(address)
    return _ordered(by_iface, unowned, preferred)


def _default_ifaces_v6(procfs: ProcFs, pid: int | str) -> list[str]:
    defaults = []
    with contextlib.suppress(OSError):
        for line in procfs.read_text(pid, "net", "ipv6_route").splitlines():
            fields = line.split()
            with contextlib.suppress(ValueError, IndexError):
                default = int(fields[0], 16) == 0 and int(fields[1], 16) == 0
                if default and not int(fields[8], 16) & _REJECT and fields[9] != "lo":
                    defaults.append((fields[9], int(fields[5], 16)))
    return _default_ifaces(defaults)


def ipv6_addresses(procfs: ProcFs, pid: int | str) -> list[str]:
    by_iface: dict[str, list[str]] = {}
    with contextlib.suppress(OSError):
        for line in procfs.read_text(pid, "net", "if_inet6").splitlines():
            fields = line.split()
            with contextlib.suppress(ValueError, IndexError):
                address = ipaddress.IPv6Address(int(fields[0], 16))
                scope, flags, iface = int(fields[3], 16), int(fields[4], 16), fields[5]
                if scope == _SCOPE_GLOBAL and not flags & _UNUSABLE and not address.is_loopback:
                    by_iface.setdefault(iface, []).append(str(address))
    return _ordered(by_iface, [], _default_ifaces_v6(procfs, pid))


def pod_addresses(procfs: ProcFs, pid: int | str) -> PodAddresses:
    """The addresses other pods and this node reach `pid`'s network namespace at, preferred first."""
    return PodAddresses(ipv4_addresses(procfs, pid), ipv6_addresses(procfs, pid))
