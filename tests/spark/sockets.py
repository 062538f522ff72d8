"""The listening TCP sockets of a process tree, read from ``/proc`` (Linux; no mocks, no psutil).

``/proc/<pid>/fd/*`` links name a socket's inode (``socket:[12345]``); ``/proc/net/tcp`` and
``/proc/net/tcp6`` list every socket with its local address, state (``0A`` = LISTEN) and inode.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def socket_inodes(pids: list[int]) -> set[int]:
    """Inodes of the sockets the processes hold open."""
    inodes: set[int] = set()
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])  # one little-endian 32-bit word
    words = b"".join(raw[index : index + 4][::-1] for index in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return address.ipv4_mapped or address


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state held by ``pid`` or its descendants."""
    inodes = socket_inodes(descendants(pid))
    found: list[tuple[str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN or int(fields[9]) not in inodes:
                continue
            host, port = fields[1].split(":")
            found.append((str(_address(host)), int(port, 16)))
    return sorted(found)


def outside_loopback(sockets: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The sockets not bound to a loopback address (``0.0.0.0`` and ``::`` are not loopback)."""
    return [(host, port) for host, port in sockets if not ipaddress.ip_address(host).is_loopback]
