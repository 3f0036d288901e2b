"""Listen addresses: parsed from HOST:PORT, bound with errors an operator can act on."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from servescope.core.errors import ServescopeError


class ListenError(ServescopeError):
    """The exporter cannot listen where it was told to; the message says why and what to do."""

    reason = "listen"


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int
    # Written `:PORT`: every interface, IPv6 too where the host has it (bound as [::], dual-stack).
    any_interface: bool = False

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """Parse `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (every interface, IPv4 and IPv6)."""
    value = text.strip()
    if value.startswith("["):
        host, sep, port = value[1:].partition("]:")
        if not sep:
            raise ValueError(f"invalid listen address {text!r}: expected [IPv6]:PORT, e.g. [::]:9108")
    else:
        host, sep, port = value.rpartition(":")
        if not sep:
            raise ValueError(f"invalid listen address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9108")
        if ":" in host:
            raise ValueError(f"invalid listen address {text!r}: write IPv6 hosts in brackets, e.g. [::]:9108")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid listen address {text!r}: port must be a number from 0 to 65535")
    return ListenAddress(host or "0.0.0.0", int(port), any_interface=not host)


def _valid_listen(text: str) -> str:
    parse_listen(text)
    return text


ListenSetting = Annotated[str, AfterValidator(_valid_listen)]
"""A settings field holding HOST:PORT: refused when the settings load if `parse_listen` refuses it."""


def bind(address: ListenAddress) -> socket.socket:
    """Bind and listen now, so a bad address fails before anything else starts.

    `:PORT` binds [::] with IPV6_V6ONLY off, which takes IPv4 (as mapped addresses) and IPv6 alike; on a
    host without IPv6 it binds 0.0.0.0.
    """
    if address.any_interface:
        try:
            return _bind(ListenAddress("::", address.port))
        except _NoIPv6Error:
            return _bind(ListenAddress("0.0.0.0", address.port))
    return _bind(address)


class _NoIPv6Error(ListenError):
    """This host cannot bind an IPv6 socket (no IPv6 in the kernel, or disabled)."""


def _bind(address: ListenAddress) -> socket.socket:
    try:
        infos = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ListenError(
            f"cannot listen on {address}: host {address.host!r} does not resolve ({exc.strerror})"
        ) from None
    family, kind, proto, _, sockaddr = infos[0]
    try:
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise _NoIPv6Error(f"cannot listen on {address}: {exc.strerror}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(sockaddr)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"cannot listen on {address}: address already in use "
                "(is another exporter running? pick another port with --listen)"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6 and address.host == "::":
            raise _NoIPv6Error(f"cannot listen on {address}: IPv6 is disabled here") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ListenError(
                f"cannot listen on {address}: no interface of this host has that address"
            ) from None
        if exc.errno == errno.EACCES:
            raise ListenError(
                f"cannot listen on {address}: permission denied (ports below 1024 need privileges)"
            ) from None
        raise ListenError(f"cannot listen on {address}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def bound_address(sock: socket.socket) -> ListenAddress:
    host, port = sock.getsockname()[:2]
    return ListenAddress(host, port)
