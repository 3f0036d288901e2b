"""Addresses no request of servescope's goes to, whatever it is configured or told, in every spelling.

Link-local addresses (169.254.0.0/16, fe80::/10), where clouds serve instance metadata and credentials;
the cloud metadata addresses outside that range; the unspecified address; and any of those or a
loopback address embedded in an IPv6 address (IPv4-mapped `::ffff:169.254.169.254`, IPv4-compatible,
NAT64 `64:ff9b::/96`, 6to4 `2002::/16`), which reach the same place by another route. An IPv4 address
in a legacy spelling (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `169.254.43518`) is read the way the
resolver reads it, so it is judged as the address it is. Host names that name metadata services are
refused by name, before they resolve.
"""

from __future__ import annotations

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
# Metadata services outside link-local: AWS's IPv6 one, Alibaba Cloud's.
_METADATA = (ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


def parse_address(host: str) -> IPAddress | None:
    """The address `host` spells ([IPv6], an IPv6 zone, legacy IPv4 forms included); None for a name."""
    text = host.strip().removeprefix("[").removesuffix("]").split("%")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if not text or not all(part for part in text.split(".")) or not text[0].isdigit():
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))  # 2852039166, 0xa9fea9fe, 169.254.43518
    except (OSError, ValueError):  # not an address; ValueError: a NUL in it
        return None


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), None if it carries none."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden(address: IPAddress) -> str | None:
    """Why no request goes to `address` (a phrase), None when one may."""
    if address.is_unspecified:
        return "the unspecified address"
    if any(address in network for network in _LINK_LOCAL):
        return "a link-local address (cloud metadata lives there)"
    if address in _METADATA:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address) and (inner := _embedded(address)) is not None:
        if inner.is_loopback:
            return f"the loopback address {inner} written as IPv6"
        reason = forbidden(inner)
        if reason is not None:
            return f"{reason}, written as IPv6 ({inner})"
    return None


def forbidden_host(host: str) -> str | None:
    """Why no request goes to `host` as written (a metadata name, a forbidden address), None otherwise;
    a name's addresses are judged when it is resolved (`http_client`'s address policy)."""
    if host.lower().rstrip(".") in METADATA_NAMES:
        return "a cloud metadata name"
    address = parse_address(host)
    return forbidden(address) if address is not None else None


def address_policy(host: str, address: IPAddress) -> str | None:
    """For `http_client.BoundedClient`: the resolved address of `host` judged (the name too)."""
    reason = forbidden_host(host) or forbidden(address)
    return None if reason is None else f"{host} ({address}) is {reason}: never asked"
