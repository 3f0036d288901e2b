"""Pods as network namespaces for tests: `ip netns` + a veth pair, addresses from 198.18.0.0/15.

Every name starts with `ssk8s`; everything created is removed again, also when a test fails. Each pod's
/30 is leased from a registry under /run (one file per subnet, created exclusively, holding the owner's
pid), so test processes running side by side (xdist workers, two checkouts) never share an address.

A pod is wired as a CNI wires one: its end of the pair is `eth0`, holding its address and its default
route. IPv6 comes from the benchmarking range 2001:2::/48 (RFC 5180, the IPv6 twin of 198.18.0.0/15):
the pod whose /30 is number N gets 2001:2:0:N::/64, so the same lease keeps both families apart. A
pod may also have a Multus-like secondary interface, `net1`, on a /30 leased before its own (so at a
lower address), which this host cannot reach: an `unreachable` route for it is put here, so no probe
ever leaves the machine. A pod whose IPv6 this host must not reach gets the same kind of route.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PREFIX = "ssk8s"
IPV6_RANGE = "2001:2:0"  # the /48 of RFC 5180; a pod's /64 is 2001:2:0:<its /30's number>::/64
# 198.18.0.0/15 holds 32,768 /30 subnets; the registry hands out the first free one.
SUBNETS = 32768
LEASES = Path("/run/ssk8s-subnets")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


@dataclass
class Pod:
    """A network namespace joined to this one by a veth pair: host side `host_address`, pod `address`."""

    name: str
    address: str  # "" for an IPv6-only pod
    host_address: str
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    address6: str = ""  # the pod's IPv6 address, when it has one
    host_address6: str = ""  # this side's, when this host routes to the pod's IPv6
    secondary_address: str = ""  # net1's, when the pod has a Multus-like secondary interface

    def start_engine(self, listen: str, engine: str = "0") -> tuple[subprocess.Popen[str], int]:
        """A simulated vLLM server inside the namespace; returns it and the port it bound."""
        argv = [sys.executable, "-m", "servescope_sim.vllm_server", "--listen", listen, "--engine", engine]
        return self._start([*argv, "--exit-with-parent"], r"serving on \S+:(\d+)", "the simulated engine")

    def start_dp_server(self, metrics_dir: str, ranks: int = 2) -> tuple[subprocess.Popen[str], int]:
        """A data-parallel server tree as vLLM's: VLLM::EngineCore_DP<n> children of the HTTP server,
        each with a VLLM::Worker child (titles set with bash's exec -a); /metrics from `metrics_dir`."""
        cores = "".join(
            f"(exec -a VLLM::EngineCore_DP{n} bash -c '(exec -a VLLM::Worker sleep 600) & wait') & "
            for n in range(ranks)
        )
        server = f"exec {sys.executable} -u -m http.server --bind 0.0.0.0 0 --directory {metrics_dir}"
        return self._start(["bash", "-c", cores + server], r"port (\d+)", "the data-parallel server")

    def start(self, argv: list[str], port_line: str, what: str) -> tuple[subprocess.Popen[str], int]:
        """`argv` inside the namespace (stopped with the pod); the port is read from its first line."""
        return self._start(argv, port_line, what)

    def _start(self, argv: list[str], port_line: str, what: str) -> tuple[subprocess.Popen[str], int]:
        """`argv` inside the namespace; the port is read from its first line of output."""
        process = subprocess.Popen(
            ["ip", "netns", "exec", self.name, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.processes.append(process)
        assert process.stdout is not None
        found = re.search(port_line, process.stdout.readline())
        assert found, f"{what} in {self.name} did not start"
        return process, int(found.group(1))


def _require_netns() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    probe = f"{PREFIX}-probe-{os.getpid()}"
    result = ip("netns", "add", probe, check=False)
    if result.returncode != 0:
        pytest.skip(f"ip netns add is not permitted here: {result.stderr.strip()}")
    ip("netns", "del", probe, check=False)


def _kill_tree(pid: int) -> None:
    """The process and everything it started (a data-parallel server's engine cores and workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    with contextlib.suppress(OSError):
        for child in children.read_text().split():
            _kill_tree(int(child))
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts as existing)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return pid > 0


def _owner_alive(lease: Path) -> bool:
    try:
        owner = lease.read_text()
    except OSError:
        return False
    if not owner:
        return True  # created a moment ago, its owner's pid not written yet
    return owner.isdigit() and _alive(int(owner))


def _reap_dead_owners() -> None:
    """Namespaces left by a test process that was killed before its cleanup (SIGKILL, a CI timeout):
    deleting one takes its veth pair with it, so its address stops shadowing the next lease's."""
    listed = ip("netns", "list", check=False).stdout
    for name, owner in re.findall(rf"^({PREFIX}-(\d+)-\S+)", listed, re.MULTILINE):
        if not _alive(int(owner)):
            ip("netns", "del", name, check=False)


def _in_use_here(number: int) -> bool:
    """Whether this host already has an address or a route in /30 number `number` (or its IPv6 /64):
    left by a process whose lease file is gone, or owned by a run whose /run this process cannot see."""
    network, network6 = f"{subnet_address(number, 0)}/30", f"{IPV6_RANGE}:{number:x}::/64"
    queries = (
        ("-4", "-o", "addr", "show", "to", network),
        ("-4", "route", "show", "table", "all", "root", network),
        ("-6", "route", "show", "table", "all", "root", network6),
    )
    return any(ip(*query, check=False).stdout.strip() for query in queries)


def lease_subnet() -> int:
    """The number of a free /30 of 198.18.0.0/15, leased to this process until `release_subnet`.

    A lease whose owner has died (a test process killed before its cleanup) is taken over, its
    unreachable routes removed; a number this host still holds an address or route in is passed over."""
    LEASES.mkdir(parents=True, exist_ok=True)
    _reap_dead_owners()
    for number in range(1, SUBNETS):
        lease = LEASES / str(number)
        try:
            descriptor = os.open(lease, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _owner_alive(lease):
                continue
            _drop_unreachable_routes(number)
            lease.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as handle:
            handle.write(str(os.getpid()))
        if not _in_use_here(number):
            return number
        lease.unlink()
    raise RuntimeError("every /30 of 198.18.0.0/15 is leased")


def _drop_unreachable_routes(number: int) -> None:
    """The routes a dead owner's secondary interface or unrouted IPv6 left (this module adds no other)."""
    ip("route", "del", "unreachable", f"{subnet_address(number, 0)}/30", check=False)
    ip("-6", "route", "del", "unreachable", f"{IPV6_RANGE}:{number:x}::/64", check=False)


def release_subnet(number: int) -> None:
    (LEASES / str(number)).unlink(missing_ok=True)


def subnet_address(number: int, host: int) -> str:
    """Host `host` (1 or 2) of /30 number `number` inside 198.18.0.0/15."""
    value = (198 << 24) | (18 << 16) | (number * 4 + host)
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def subnet_address6(number: int, host: int) -> str:
    """Host `host` (1: this side, 2: the pod) of the pod's IPv6 /64."""
    return f"{IPV6_RANGE}:{number:x}::{host}"


@contextmanager
def pod_namespace(
    index: int,
    *,
    ipv4: bool = True,
    ipv6: bool = False,
    ipv6_routed: bool = True,
    secondary: bool = False,
) -> Iterator[Pod]:
    """Namespace ssk8s-<pid>-<index>: a leased /30 of 198.18.0.0/15, .2 inside (on `eth0`, the default
    route's interface) and .1 on this side; with `ipv6` also 2001:2:0:<n>::2/64 (this side ::1, or an
    unreachable route when not `ipv6_routed`); without `ipv4`, IPv6 only; with `secondary`, a `net1` at a
    lower address this host cannot reach."""
    # Set-up, then the teardown that runs whatever happened in between: one piece, longer than 40 lines.
    _require_netns()
    name = f"{PREFIX}-{os.getpid()}-{index}"
    host_if, pod_if = f"{PREFIX}{os.getpid() % 10000}h{index}", f"{PREFIX}{os.getpid() % 10000}p{index}"
    lower = lease_subnet() if secondary else None  # leased first: the lower of the two
    subnet = lease_subnet()
    pod = Pod(name, subnet_address(subnet, 2) if ipv4 else "", subnet_address(subnet, 1))
    if ipv6:
        pod.address6 = subnet_address6(subnet, 2)
        pod.host_address6 = subnet_address6(subnet, 1) if ipv6_routed else ""
    if lower is not None:
        pod.secondary_address = subnet_address(lower, 2)
    undo: list[list[str]] = []
    try:
        _wire(pod, name, (host_if, pod_if), (subnet, lower), undo)
        yield pod
    finally:
        for process in pod.processes:
            _kill_tree(process.pid)
            process.wait(10)
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        for command in reversed(undo):
            ip(*command, check=False)
        ip("link", "del", host_if, check=False)
        ip("netns", "del", name, check=False)
        release_subnet(subnet)
        if lower is not None:
            release_subnet(lower)


def _wire(
    pod: Pod, name: str, interfaces: tuple[str, str], subnets: tuple[int, int | None], undo: list[list[str]]
) -> None:
    """The veth pair (the pod's end named eth0), addresses, default routes and unreachable routes."""
    (host_if, pod_if), (subnet, lower) = interfaces, subnets
    ip("netns", "add", name)
    ip("link", "add", host_if, "type", "veth", "peer", "name", pod_if)
    ip("link", "set", pod_if, "netns", name)
    ip("-n", name, "link", "set", pod_if, "name", "eth0")
    ip("link", "set", host_if, "up")
    ip("-n", name, "link", "set", "eth0", "up")
    ip("-n", name, "link", "set", "lo", "up")
    if pod.address:
        ip("addr", "add", f"{pod.host_address}/30", "dev", host_if)
        ip("-n", name, "addr", "add", f"{pod.address}/30", "dev", "eth0")
        ip("-n", name, "route", "add", "default", "via", pod.host_address, "dev", "eth0")
    if pod.address6:
        ip("-n", name, "addr", "add", f"{pod.address6}/64", "dev", "eth0", "nodad")
        network6 = f"{IPV6_RANGE}:{subnet:x}::/64"
        if pod.host_address6:
            ip("addr", "add", f"{pod.host_address6}/64", "dev", host_if, "nodad")
            ip("-n", name, "-6", "route", "add", "default", "via", pod.host_address6, "dev", "eth0")
        else:  # this host must not reach it, and nothing sent there may leave the machine
            ip("-6", "route", "add", "unreachable", network6)
            undo.append(["-6", "route", "del", "unreachable", network6])
    if lower is not None:
        # net1's other end is in a namespace of its own, as an SR-IOV function's network is elsewhere.
        network, elsewhere = f"{subnet_address(lower, 0)}/30", f"{name}-net1"
        ip("netns", "add", elsewhere)
        undo.append(["netns", "del", elsewhere])
        ip("-n", name, "link", "add", "net1", "type", "veth", "peer", "name", "peer1", "netns", elsewhere)
        ip("-n", name, "addr", "add", f"{pod.secondary_address}/30", "dev", "net1")
        ip("-n", name, "link", "set", "net1", "up")
        ip("-n", elsewhere, "link", "set", "peer1", "up")
        ip("route", "add", "unreachable", network)
        undo.append(["route", "del", "unreachable", network])


@contextmanager
def linked(first: Pod, second: Pod, index: int) -> Iterator[tuple[str, str]]:
    """A veth pair straight between two pods' namespaces, on a leased /30 of its own: (the first pod's
    address on it, the second's). Pods talk over it as over a cluster network, without this host
    forwarding between them."""
    subnet = lease_subnet()
    left, right = f"{PREFIX}{os.getpid() % 10000}l{index}", f"{PREFIX}{os.getpid() % 10000}r{index}"
    addresses = (subnet_address(subnet, 1), subnet_address(subnet, 2))
    try:
        ip(*f"link add {left} netns {first.name} type veth peer name {right} netns {second.name}".split())
        for pod, name, address in ((first, left, addresses[0]), (second, right, addresses[1])):
            ip("-n", pod.name, "addr", "add", f"{address}/30", "dev", name)
            ip("-n", pod.name, "link", "set", name, "up")
        yield addresses
    finally:
        ip("-n", first.name, "link", "del", left, check=False)
        release_subnet(subnet)
