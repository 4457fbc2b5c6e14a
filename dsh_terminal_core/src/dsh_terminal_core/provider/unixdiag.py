"""The peer of a unix socket, asked of the kernel by inode over ``NETLINK_SOCK_DIAG``.

``/proc/<pid>/fd`` names a socket only by its inode, and ``/proc/net/unix`` lists unix
sockets without saying which two form a pair. The sock_diag interface answers exactly:
one request for one inode (not a dump of every socket) with ``UDIAG_SHOW_PEER`` returns
the inode at the other end. The answer reaches only sockets of this process's network
namespace; a socket elsewhere is "unknown", which callers treat as not their own.
"""

from __future__ import annotations

import itertools
import socket
import struct

__all__ = ["UnixPeers"]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLMSG_ERROR = 0x2
_UDIAG_SHOW_PEER = 0x4
_UDIAG_SHOW_RQLEN = 0x10
_UNIX_DIAG_PEER = 2
_UNIX_DIAG_RQLEN = 4
_TCP_LISTEN = 10
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBHIIIII")  # struct unix_diag_req
_MESSAGE = struct.Struct("=BBBBIII")  # struct unix_diag_msg
_ATTRIBUTE = struct.Struct("=HH")  # struct rtattr
_PEER = struct.Struct("=I")
_RQLEN = struct.Struct("=II")  # struct unix_diag_rqlen {rqueue; wqueue}
_CONNECTED_STREAMS = frozenset({socket.SOCK_STREAM, socket.SOCK_SEQPACKET})
_TCP_ESTABLISHED = 1
_CACHE_MAX = 1024


class UnixPeers:
    """Looks up the peer inode of unix sockets.

    A connected stream or seqpacket socket keeps its peer for life, so those answers are
    remembered by inode (socket inodes are not reused while the socket lives); datagram
    sockets can reconnect and are asked every time. Each question opens and closes its
    own netlink socket, so nothing stays open between probes.
    """

    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._fixed: dict[int, int] = {}

    def peer_of(self, inode: int) -> int | None:
        """Return the inode of the socket connected to ``inode``; None if it has none,
        is not a unix socket of this namespace, or the kernel could not be asked."""
        known = self._fixed.get(inode)
        if known is not None:
            return known
        answer = self._ask(inode)
        if answer is None:
            return None
        peer, sock_type, state, _queued = answer
        if peer and sock_type in _CONNECTED_STREAMS and state == _TCP_ESTABLISHED:
            if len(self._fixed) >= _CACHE_MAX:
                self._fixed.clear()
            self._fixed[inode] = peer
        return peer or None

    def queued(self, inode: int) -> int | None:
        """What waits to be read on unix socket ``inode``: bytes for a connected socket,
        connections not yet accepted for a listening one; None when it cannot be asked."""
        answer = self._ask(inode)
        return answer[3] if answer is not None and answer[3] >= 0 else None

    def idle_listener(self, inode: int) -> bool:
        """True if ``inode`` is a listening unix socket with no connection waiting.

        It has no other end: until someone connects, nothing can arrive on it, so it
        holds no news for its owner's wait (a connection arriving later wakes the wait
        as keys do, and is new evidence then).
        """
        answer = self._ask(inode)
        return answer is not None and answer[2] == _TCP_LISTEN and answer[3] == 0

    def _ask(self, inode: int) -> tuple[int, int, int, int] | None:
        if not 0 < inode <= 0xFFFFFFFF:
            return None
        seq = next(self._seq) & 0xFFFFFFFF
        body = _REQUEST.pack(
            socket.AF_UNIX,
            0,
            0,
            _ALL_STATES,
            inode,
            _UDIAG_SHOW_PEER | _UDIAG_SHOW_RQLEN,
            _NO_COOKIE,
            _NO_COOKIE,
        )
        header = _HEADER.pack(
            _HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0
        )
        try:
            with socket.socket(
                socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
            ) as sock:
                sock.send(header + body)
                # The kernel answers a non-dump request before send() returns.
                reply = sock.recv(8192, socket.MSG_DONTWAIT)
        except OSError:
            return None
        return _parse(reply, seq, inode)


def _parse(reply: bytes, seq: int, inode: int) -> tuple[int, int, int, int] | None:
    """``(peer inode or 0, socket type, state, queued or -1)`` from one reply; None for an
    error reply."""
    if len(reply) < _HEADER.size:
        return None
    length, kind, _flags, got_seq, _pid = _HEADER.unpack_from(reply)
    if kind == _NLMSG_ERROR or got_seq != seq or kind != _SOCK_DIAG_BY_FAMILY:
        return None
    end = min(length, len(reply))
    offset = _HEADER.size
    if end < offset + _MESSAGE.size:
        return None
    family, sock_type, state, _pad, got_inode, _c0, _c1 = _MESSAGE.unpack_from(reply, offset)
    if family != socket.AF_UNIX or got_inode != inode:
        return None
    offset += _MESSAGE.size
    peer = 0
    queued = -1
    while offset + _ATTRIBUTE.size <= end:
        size, attribute = _ATTRIBUTE.unpack_from(reply, offset)
        if size < _ATTRIBUTE.size:
            break
        if attribute == _UNIX_DIAG_PEER and size >= _ATTRIBUTE.size + _PEER.size:
            (peer,) = _PEER.unpack_from(reply, offset + _ATTRIBUTE.size)
        elif attribute == _UNIX_DIAG_RQLEN and size >= _ATTRIBUTE.size + _RQLEN.size:
            queued, _written = _RQLEN.unpack_from(reply, offset + _ATTRIBUTE.size)
        offset += (size + 3) & ~3
    return peer, sock_type, state, queued
