"""What /proc says about processes and their listening TCP sockets; every path under one root.

The root is configurable so tests run the real code on fixture trees. PIDs are those of the PID
namespace the root belongs to: in a container, NVML's (host) PIDs match only with hostPID.

Paths are plain strings and listings come from os.scandir, not pathlib: pathlib interns every path
part, and a walk over every PID and fd of a busy host made CPython's table of interned strings grow
for as long as new PIDs kept appearing (seen as steady RSS growth in the footprint benchmark).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
MAX_CMDLINE_BYTES = 4096  # a process title and its flags; longer argument lists are cut here
MAX_ENVIRON_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Listener:
    address: str  # as the socket is bound: 0.0.0.0, 127.0.0.1, ::
    port: int
    inode: int


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))  # /proc/net/tcp prints it little-endian
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


class ProcFs:
    def __init__(self, root: str | Path = "/proc") -> None:
        self.root = os.fspath(root)

    def _read(self, *parts: str) -> str:
        with open(os.path.join(self.root, *parts), encoding="utf-8", errors="replace") as file:
            return file.read()

    def read_text(self, pid: int | str, *parts: str) -> str:
        """A file under `pid`'s entry (`self`: this process's), e.g. ("net", "route"); OSError if not."""
        return self._read(str(pid), *parts)

    def access_denied(self, pid: int) -> bool:
        """True when this process may not look into `pid`'s sockets and namespaces: its fd/ and ns/ need
        ptrace read access (the same UID and no fewer capabilities, else CAP_SYS_PTRACE; an AppArmor
        profile may refuse it even so). A process that is gone is not denied."""
        for path in (("fd",), ("ns", "net")):
            try:
                target = os.path.join(self.root, str(pid), *path)
                os.listdir(target) if path == ("fd",) else os.readlink(target)
            except PermissionError:
                return True
            except OSError:
                continue
        return False

    def _read_bytes(self, limit: int, *parts: str) -> bytes:
        with open(os.path.join(self.root, *parts), "rb") as file:
            return file.read(limit)

    def listeners(self, pid: int | None = None) -> dict[int, Listener]:
        """Listening TCP sockets by inode, from net/tcp and net/tcp6: those of the network namespace
        `pid` is in, or of the root's own (the reader's namespace) without one."""
        found: dict[int, Listener] = {}
        if pid is not None and not os.path.isdir(os.path.join(self.root, str(pid), "net")):
            pid = None  # a tree without per-process net/ (an older kernel, a fixture): the root's
        prefix = () if pid is None else (str(pid),)
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(OSError):
                for line in self._read(*prefix, "net", table).splitlines()[1:]:
                    fields = line.split()
                    if len(fields) < 10 or fields[3] != LISTEN:
                        continue
                    hex_address, _, hex_port = fields[1].partition(":")
                    inode = int(fields[9])
                    found[inode] = Listener(_address(hex_address), int(hex_port, 16), inode)
        return found

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError), os.scandir(self.root) as entries:
            return [int(entry.name) for entry in entries if entry.name.isdigit()]
        return []

    def socket_inodes(self, pid: int) -> set[int]:
        """Inodes of the sockets a process holds (needs permission to read its fd/ directory)."""
        inodes = set()
        with contextlib.suppress(OSError):
            fd_dir = os.path.join(self.root, str(pid), "fd")
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    target = os.readlink(os.path.join(fd_dir, fd))
                    if target.startswith("socket:["):
                        inodes.add(int(target[8:-1]))
        return inodes

    def parent(self, pid: int) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = self._read(str(pid), "stat")
            return int(stat.rsplit(")", 1)[1].split()[1])  # the name in () may hold spaces
        return None

    def children(self) -> dict[int, list[int]]:
        tree: dict[int, list[int]] = {}
        for pid in self.pids():
            parent = self.parent(pid)
            if parent is not None:
                tree.setdefault(parent, []).append(pid)
        return tree

    def descendants(self, pids: set[int]) -> set[int]:
        """The processes and all their descendants (vLLM's GPU memory sits in EngineCore/Worker children)."""
        tree, found, todo = self.children(), set(pids), list(pids)
        while todo:
            for child in tree.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def ancestors(self, pid: int) -> list[int]:
        chain, current = [], self.parent(pid)
        while current is not None and current > 1 and current not in chain:
            chain.append(current)
            current = self.parent(current)
        return chain

    def listening_pids(self, port: int) -> set[int]:
        """PIDs holding a socket that listens on `port` (any address)."""
        inodes = {inode for inode, listener in self.listeners().items() if listener.port == port}
        if not inodes:
            return set()
        return {pid for pid in self.pids() if self.socket_inodes(pid) & inodes}

    def cmdline(self, pid: int) -> list[str]:
        """The argument vector (a process title set with setproctitle is its first item)."""
        with contextlib.suppress(OSError):
            raw = self._read_bytes(MAX_CMDLINE_BYTES, str(pid), "cmdline")
            return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]
        return []

    def comm(self, pid: int) -> str:
        """The kernel's 15-character process name (from comm, else the name in stat)."""
        with contextlib.suppress(OSError):
            return self._read(str(pid), "comm").strip()
        with contextlib.suppress(OSError):
            stat = self._read(str(pid), "stat")
            return stat[stat.find("(") + 1 : stat.rfind(")")]
        return ""

    def environ(self, pid: int, name: str) -> str | None:
        """One variable of the process's initial environment (needs the same rights as its fd/)."""
        with contextlib.suppress(OSError):
            prefix = name.encode() + b"="
            for item in self._read_bytes(MAX_ENVIRON_BYTES, str(pid), "environ").split(b"\0"):
                if item.startswith(prefix):
                    return item[len(prefix) :].decode(errors="replace")
        return None

    def netns(self, pid: int | str) -> str | None:
        """The network namespace's identity (`net:[inode]`), `pid` may be "self"; None if unreadable."""
        with contextlib.suppress(OSError):
            return os.readlink(os.path.join(self.root, str(pid), "ns", "net"))
        return None

    def local_addresses(self, pid: int | str) -> list[str]:
        """IPv4 addresses local to `pid`'s network namespace, loopback left out (from net/fib_trie)."""
        found: list[str] = []
        with contextlib.suppress(OSError):
            previous = ""
            for line in self._read(str(pid), "net", "fib_trie").splitlines():
                text = line.strip()
                if text.startswith("/32 host LOCAL") and previous.startswith("|-- "):
                    address = previous[4:]
                    if not address.startswith("127.") and address not in found:
                        found.append(address)
                previous = text
        return found
