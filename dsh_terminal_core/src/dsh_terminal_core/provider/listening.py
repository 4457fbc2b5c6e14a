"""Which sockets a session's processes listen on, read exactly from ``/proc`` (§19.3).

A server started in a terminal (``python3 -m http.server``, a dev server, a daemon on a
unix socket) is waiting for connections, not for the terminal, so the send that started
it can say where it listens instead of waiting out the silence. This module answers that
question and nothing else, from three sources:

* who belongs to the session: the shell's descendants, through the per-thread
  ``/proc/<pid>/task/<tid>/children`` files (a scan of every process's parent where the
  kernel has no such files);
* which sockets each holds: ``/proc/<pid>/fd/*`` links of the form ``socket:[inode]``;
* which of those listen, and where: the socket tables of *that process's* network
  namespace, ``/proc/<pid>/net/unix``, ``tcp`` and ``tcp6``. A sandboxed shell may run
  in a namespace of its own (``bwrap --unshare-net``), whose sockets the caller's
  ``/proc/net`` never lists, so the caller's tables are never read for it. Each
  namespace's tables are read at most once per call, and only until every socket asked
  about has been found in them. A read of ``tcp`` or ``tcp6`` costs about a
  millisecond whatever it lists (:mod:`.inetdiag` says why), so for processes in this
  process's own namespace the TCP listeners are asked of the kernel by sock_diag
  instead, which gives the same answer for a few tens of microseconds.

Everything is best effort against a moving target: a process that exits, execs or
closes a descriptor while it is read, and a file this process may not read, is skipped,
never raised. A listener reported existed at the moment its table was read.

Linux only; elsewhere every answer is empty.
"""

from __future__ import annotations

import collections
import functools
import os
import re
import struct
from collections.abc import Iterable
from typing import TypedDict

import attrs

from .inetdiag import address_text, listening_here
from .procfs import PROC, iter_pids, read_bytes, read_stat

__all__ = [
    "COMMAND_LIMIT",
    "MAX_PROCESSES",
    "Listener",
    "ListenerValue",
    "SocketRow",
    "has_children",
    "listeners",
    "listening_in_session",
    "parse_tcp_row",
    "parse_unix_row",
    "session_processes",
]

MAX_PROCESSES = 4096  # descendants listed at most; a fork bomb must not make a send slow
COMMAND_LIMIT = 200  # characters of a command line reported, the last one "…" when cut

_TCP_LISTEN = b"0A"  # TCP_LISTEN, as the tables print the state (%02X)
_SO_ACCEPTCON = 0x10000  # the unix table's Flags for a socket in the listen state
_SS_UNCONNECTED = 1  # the unix table's St for a socket not connected (listeners are)
_WORD = struct.Struct("=I")  # the tables print each 32-bit address word in host order
_TABLE_CHUNK = 65536
_CMDLINE_READ = 4096  # enough bytes for COMMAND_LIMIT characters of any encoding
# A whole row of /proc/net/unix (a named path may hold spaces and even newlines):
# Num: RefCount Protocol Flags Type St Inode [Path]
_UNIX_ROW = re.compile(
    rb"\s*[0-9A-Fa-f]+: [0-9A-F]{8} [0-9A-F]{8} ([0-9A-F]{8}) [0-9A-F]{4} ([0-9A-F]{2})"
    rb" +(\d+)(?: (.+))?\Z",
    re.DOTALL,
)

# Listening sockets found in a namespace's tables: inode -> (address, port).
_Found = dict[int, tuple[str, int | None]]


class ListenerValue(TypedDict):
    """The wire form of a :class:`Listener`: an entry of a result's ``listening`` list."""

    address: str
    port: int | None
    pid: int
    command: str


@attrs.frozen(kw_only=True)
class Listener:
    """A socket a process holds that is accepting connections.

    ``inode`` names the socket itself: a caller that remembers the inodes it saw before
    a send tells a server that began listening since from one that was already there,
    and the same socket held by several processes (a forking server's workers) from
    several sockets.
    """

    address: str  # "0.0.0.0", "127.0.0.1", "::", "::1", ...; a unix socket's path
    port: int | None  # None for a unix socket
    pid: int  # a process holding the socket (one Listener per holder)
    command: str  # that process's command line, at most COMMAND_LIMIT characters
    inode: int

    def to_wire(self) -> ListenerValue:
        """The entry of a result's ``listening`` list: address, port, pid, command."""
        return {
            "address": self.address,
            "port": self.port,
            "pid": self.pid,
            "command": self.command,
        }


@attrs.frozen(kw_only=True)
class SocketRow:
    """What one row of a ``/proc/<pid>/net`` socket table says about listening.

    ``address`` is the local address of a TCP socket, or a unix socket's name as the
    table prints it: the path of a named one, ``@`` and the name (NULs shown as ``@``)
    of an abstract one, None for one never bound.
    """

    inode: int
    address: str | None
    port: int | None
    listening: bool


def session_processes(root_pid: int) -> list[int]:
    """Return the pids of ``root_pid``'s descendants, not ``root_pid`` itself.

    Nearest first, at most :data:`MAX_PROCESSES`. Read through the
    ``/proc/<pid>/task/<tid>/children`` file of every thread (a child's parent is the
    thread that forked it); on a kernel built without ``CONFIG_PROC_CHILDREN`` the
    parent of every process in ``/proc`` is read instead. A process that left the tree
    (a daemon that forked twice, reparented to init or a subreaper) is not a
    descendant; one forked or exiting while the tree is walked may be missed. Pids are
    as this process's ``/proc`` numbers them, also for a shell in its own pid namespace.
    """
    if not _children_files_exist():
        return _descendants_by_parent(root_pid)
    found: list[int] = []
    seen = {root_pid}
    frontier = collections.deque([root_pid])
    while frontier and len(found) < MAX_PROCESSES:
        for child in _children_of(frontier.popleft()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                frontier.append(child)
    return found[:MAX_PROCESSES]


def has_children(pid: int) -> bool:
    """Return whether ``pid`` has a child process, at the cost of one small read.

    Called on every send to skip everything else for the common case, a shell at its
    prompt with no jobs: one open, read and close of the main thread's
    ``/proc/<pid>/task/<pid>/children``. Children forked by the process's other threads
    are not seen; a shell is single-threaded, so for the shell this is exact. False for
    a process that is gone; True for a live one on a kernel without ``children`` files
    (unknown, so the caller looks).
    """
    try:
        fd = os.open(f"{PROC}/{pid}/task/{pid}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return not _children_files_exist() and os.path.exists(f"{PROC}/{pid}")
    try:
        return bool(os.read(fd, 1))
    except OSError:
        return False
    finally:
        os.close(fd)


def listeners(pids: Iterable[int]) -> list[Listener]:
    """Return the sockets the given processes hold in the listen state.

    TCP over IPv4 and IPv6 (state ``0A`` in ``tcp`` and ``tcp6``) and named unix sockets
    (``__SO_ACCEPTCON`` in ``unix``), looked up in each process's own network namespace
    (for this process's namespace, TCP listeners are asked of the kernel by sock_diag,
    which answers the same without the cost of the ``tcp`` tables).
    Abstract unix sockets (``@name``) are not reported: they have no path a person can
    give a client, and §19.3 asks for named ones. The table cannot tell a relative path
    that begins with ``@`` from an abstract name, so such a path is taken as abstract.
    A unix path is reported as it was bound: relative to the binder's directory then,
    and inside the binder's mount namespace. A socket created in another network
    namespace and carried into this one is not found.

    One :class:`Listener` per (socket, holder), sorted by port (unix sockets last),
    address, pid. Never raises: processes that vanish and files that cannot be read
    are skipped.
    """
    held: dict[int, set[int]] = {}
    by_namespace: dict[int, list[int]] = {}
    for pid in dict.fromkeys(pids):
        inodes = _socket_inodes(pid)
        if not inodes:
            continue
        try:
            namespace = os.stat(f"{PROC}/{pid}/ns/net").st_ino
        except OSError:
            continue
        held[pid] = inodes
        by_namespace.setdefault(namespace, []).append(pid)
    try:
        here = os.stat(f"{PROC}/self/ns/net").st_ino
    except OSError:
        here = None
    found: list[Listener] = []
    for namespace, members in by_namespace.items():
        wanted = set().union(*(held[pid] for pid in members))
        addresses = _namespace_listeners(members, wanted, namespace == here)
        for pid in members:
            mine = held[pid] & addresses.keys()
            if not mine:
                continue
            command = _command(pid)
            for inode in mine:
                address, port = addresses[inode]
                found.append(
                    Listener(address=address, port=port, pid=pid, command=command, inode=inode)
                )
    found.sort(key=_order)
    return found


def listening_in_session(shell_pid: int) -> list[Listener]:
    """Return what the shell's descendants listen on; the shell itself is not looked at.

    A shell with no children costs one small read (:func:`has_children`).
    """
    if not has_children(shell_pid):
        return []
    return listeners(session_processes(shell_pid))


def parse_tcp_row(line: bytes, *, ipv6: bool) -> SocketRow | None:
    """Parse one row of ``/proc/<pid>/net/tcp`` (or ``tcp6``); None if it is not a row.

    The tables print each 32-bit word of an address in host byte order (on x86,
    ``0100007F:1F90`` is 127.0.0.1:8080) and the port as a number. IPv6 addresses are
    written as :mod:`ipaddress` writes them, except an IPv4-mapped one, which is always
    ``::ffff:`` and the dotted quad (RFC 5952 §5, and what ``ss`` prints), whatever this
    Python's ``ipaddress`` does.
    """
    fields = line.split()
    if len(fields) < 10:
        return None
    return _tcp_row(fields, ipv6)


def parse_unix_row(line: bytes) -> SocketRow | None:
    """Parse one row of ``/proc/<pid>/net/unix``; None if it is not a row.

    The path is everything after the inode and one space, so it may hold spaces (and
    newlines, when a caller has joined the lines a path broke into); it is decoded as
    the file system encoding decodes file names.
    """
    match = _UNIX_ROW.match(line)
    if match is None:
        return None
    flags, state, inode, path = match.groups()
    return SocketRow(
        inode=int(inode),
        address=os.fsdecode(path) if path is not None else None,
        port=None,
        listening=bool(int(flags, 16) & _SO_ACCEPTCON) and int(state, 16) == _SS_UNCONNECTED,
    )


def _order(listener: Listener) -> tuple[bool, int, str, int, int]:
    return (
        listener.port is None,
        listener.port or 0,
        listener.address,
        listener.pid,
        listener.inode,
    )


@functools.cache
def _children_files_exist() -> bool:
    """Whether this kernel has ``/proc/<pid>/task/<tid>/children`` (CONFIG_PROC_CHILDREN)."""
    me = os.getpid()
    return os.path.exists(f"{PROC}/{me}/task/{me}/children")


def _children_of(pid: int) -> list[int]:
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in tids:
        raw = read_bytes(f"{PROC}/{pid}/task/{tid}/children")
        if raw:
            children.extend(int(child) for child in raw.split())
    return children


def _descendants_by_parent(root_pid: int) -> list[int]:
    """:func:`session_processes` from every process's parent, for kernels without
    ``children`` files."""
    children: dict[int, list[int]] = {}
    for pid in iter_pids():
        stat = read_stat(pid)
        if stat is not None:
            children.setdefault(stat.ppid, []).append(pid)
    found: list[int] = []
    seen = {root_pid}
    frontier = collections.deque([root_pid])
    while frontier and len(found) < MAX_PROCESSES:
        for child in children.get(frontier.popleft(), ()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                frontier.append(child)
    return found[:MAX_PROCESSES]


def _socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets in ``pid``'s descriptor table; empty if it cannot be read."""
    try:
        directory = os.open(f"{PROC}/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return set()
    inodes: set[int] = set()
    try:
        # Links read relative to the open directory: no path walk of /proc per descriptor.
        for name in os.listdir(directory):
            try:
                target = os.readlink(name, dir_fd=directory)
            except OSError:
                continue
            if target.startswith("socket:[") and target.endswith("]"):
                try:
                    inodes.add(int(target[8:-1]))
                except ValueError:
                    continue
    except OSError:
        return set()
    finally:
        os.close(directory)
    return inodes


def _namespace_listeners(members: list[int], wanted: set[int], here: bool) -> _Found:
    """The listening sockets among ``wanted``, from the tables of the namespace the
    ``members`` share (``here``: this process's), read through the first member still
    there to read them."""
    for pid in members:
        found = _read_tables(pid, wanted, here)
        if found is not None:
            return found
    return {}


def _read_tables(pid: int, wanted: set[int], here: bool) -> _Found | None:
    """Look ``wanted`` up in ``pid``'s namespace's tables; None if none could be read.

    Cheapest first, stopping once every inode has been seen (listening or not): the
    unix table (its cost follows its rows), then in this process's own namespace a
    sock_diag dump of the TCP listeners (:mod:`.inetdiag`), elsewhere (or when the
    kernel cannot be asked) ``tcp`` and ``tcp6``, each read of which walks the kernel's
    whole established hash. A pid reused by a process of another namespace between the
    caller's look and this read does no harm: socket inodes are unique, so its tables
    hold none of the wanted ones.
    """
    remaining = set(wanted)
    found: _Found = {}
    readable = False
    data = _read_table(f"{PROC}/{pid}/net/unix")
    if data is not None:
        readable = True
        _scan_unix(data, remaining, found)
    if remaining and here:
        inet = listening_here()
        if inet is not None:
            for inode in remaining & inet.keys():
                found[inode] = inet[inode]
            return found
    for name in ("tcp", "tcp6"):
        if not remaining:
            break
        data = _read_table(f"{PROC}/{pid}/net/{name}")
        if data is None:
            continue  # a kernel without IPv6 has no tcp6
        readable = True
        _scan_tcp(data, name == "tcp6", remaining, found)
    return found if readable else None


def _scan_tcp(data: bytes, ipv6: bool, remaining: set[int], found: _Found) -> None:
    for line in data.split(b"\n")[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            inode = int(fields[9])
        except ValueError:
            continue
        if inode not in remaining:
            continue
        remaining.discard(inode)
        row = _tcp_row(fields, ipv6)
        if row is not None and row.listening and row.address is not None:
            found[inode] = (row.address, row.port)


def _scan_unix(data: bytes, remaining: set[int], found: _Found) -> None:
    # The kernel prints a path as it is, so one holding a newline continues on lines
    # that are not rows; only the trailing newline ends the table.
    lines = (data[:-1] if data.endswith(b"\n") else data).split(b"\n")
    index, count = 1, len(lines)
    while index < count:
        line = lines[index]
        index += 1
        fields = line.split(None, 7)
        if len(fields) < 7:
            continue
        try:
            inode = int(fields[6])
        except ValueError:
            continue
        if inode not in remaining:
            continue
        while index < count and _UNIX_ROW.match(lines[index]) is None:
            line += b"\n" + lines[index]
            index += 1
        row = parse_unix_row(line)
        if row is None:
            continue
        remaining.discard(inode)
        if row.listening and row.address and not row.address.startswith("@"):
            found[inode] = (row.address, None)


def _tcp_row(fields: list[bytes], ipv6: bool) -> SocketRow | None:
    host, _, port = fields[1].partition(b":")
    try:
        if ipv6:
            if len(host) != 32:
                return None
            packed = b"".join(_WORD.pack(int(host[at : at + 8], 16)) for at in range(0, 32, 8))
        else:
            if len(host) != 8:
                return None
            packed = _WORD.pack(int(host, 16))
        return SocketRow(
            inode=int(fields[9]),
            address=address_text(packed),
            port=int(port, 16),
            listening=fields[3] == _TCP_LISTEN,
        )
    except (ValueError, struct.error):
        return None


def _read_table(path: str) -> bytes | None:
    """A whole ``/proc`` table, in large reads (the host's may list thousands of rows)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        parts = []
        while chunk := os.read(fd, _TABLE_CHUNK):
            parts.append(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def _command(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces; its ``comm`` when empty."""
    raw = read_bytes(f"{PROC}/{pid}/cmdline", _CMDLINE_READ)
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace") if raw else ""
    if not text:
        comm = read_bytes(f"{PROC}/{pid}/comm")
        text = comm.decode("utf-8", "replace").strip() if comm else ""
    if len(text) > COMMAND_LIMIT:
        text = text[: COMMAND_LIMIT - 1] + "…"
    return text
