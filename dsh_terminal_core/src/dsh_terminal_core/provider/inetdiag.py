"""The TCP sockets listening in this process's network namespace, asked of the kernel.

Reading ``/proc/<pid>/net/tcp`` makes the kernel walk its whole hash of established
connections, however few rows it prints: that hash is sized by memory (262,144 buckets
on a machine with a few gigabytes), and each read of ``tcp`` or ``tcp6`` measured about
1.2 ms with a handful of sockets open. A ``NETLINK_SOCK_DIAG`` dump asked only for the
listen state walks the listening hash alone and costs tens of microseconds. The answer
covers only the namespace of the socket that asks, which is this process's, so it serves
only processes that share it; others are read from their own ``/proc/<pid>/net``.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

__all__ = ["address_text", "listening_here"]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_NLMSG_ERROR = 0x2
_NLMSG_DONE = 0x3
_TCP_LISTEN_ONLY = 1 << 10  # idiag_states: the TCP_LISTEN bit
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBBBI48x")  # struct inet_diag_req_v2, an empty inet_diag_sockid
# struct inet_diag_msg: family, state, timer, retrans; the sockid (ports big-endian);
# expires, rqueue, wqueue, uid, inode.
_MESSAGE = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
_RECEIVE = 65536
_TIMEOUT = 1.0  # a dump the kernel does not finish is a failure, never a hang


def listening_here() -> dict[int, tuple[str, int]] | None:
    """Return inode -> (address, port) of every TCP listener (IPv4 and IPv6) here.

    None if the kernel could not be asked or refused (no ``inet_diag``, no IPv6, a
    seccomp filter): the caller then reads the ``/proc`` tables instead. Addresses are
    written as :func:`address_text` writes them.
    """
    found: dict[int, tuple[str, int]] = {}
    try:
        with socket.socket(
            socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
        ) as sock:
            sock.settimeout(_TIMEOUT)
            for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
                if not _dump(sock, family, seq, found):
                    return None
    except OSError:
        return None
    return found


def address_text(packed: bytes) -> str:
    """Write a 4- or 16-byte address as text; an IPv4-mapped one as ``::ffff:a.b.c.d``.

    RFC 5952 §5 form, and what ``ss`` prints, whatever this Python's :mod:`ipaddress`
    writes for it (3.13 changed that).
    """
    if len(packed) == 4:
        return str(ipaddress.IPv4Address(packed))
    address = ipaddress.IPv6Address(packed)
    mapped = address.ipv4_mapped
    return f"::ffff:{mapped}" if mapped is not None else str(address)


def _dump(sock: socket.socket, family: int, seq: int, found: dict[int, tuple[str, int]]) -> bool:
    """Ask for one family's listeners and add them to ``found``; False on any failure."""
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _TCP_LISTEN_ONLY)
    sock.send(
        _HEADER.pack(
            _HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, seq, 0
        )
        + body
    )
    while True:
        reply = sock.recv(_RECEIVE)
        offset = 0
        while offset + _HEADER.size <= len(reply):
            length, kind, _flags, got_seq, _port = _HEADER.unpack_from(reply, offset)
            if length < _HEADER.size:
                return False
            if got_seq == seq:
                if kind == _NLMSG_DONE:
                    return True
                if kind == _NLMSG_ERROR:
                    return False
                if kind == _SOCK_DIAG_BY_FAMILY and length >= _HEADER.size + _MESSAGE.size:
                    _add(reply, offset + _HEADER.size, found)
            offset += (length + 3) & ~3
        if not reply:
            return False


def _add(reply: bytes, offset: int, found: dict[int, tuple[str, int]]) -> None:
    fields = _MESSAGE.unpack_from(reply, offset)
    family, sport, source, inode = fields[0], fields[4], fields[6], fields[14]
    packed = source[:4] if family == socket.AF_INET else source
    found[inode] = (address_text(packed), int.from_bytes(sport, "big"))
