"""A wait for keys that runs through other processes: mc's subshell, tmux and screen nested.

Some programs wait for keys together with other processes, on channels to them:

* ``mc`` waits on the terminal and on the master of a terminal of its own, where its
  subshell (bash) waits for the commands mc types into it;
* a nested ``tmux`` client waits on a unix socket to its server, a daemon outside the
  session's process tree, which reads the session's terminal itself (it opened it by
  name) next to the masters of its panes' terminals, where the panes' shells wait;
* a nested GNU ``screen`` leaves the foreground to a process asleep in ``pause()`` while
  its child, the backend (in a session of its own), reads the terminal next to its
  socket and its windows' masters.

One process's wait proves nothing there: the keys may still be on their way through
the others. :class:`PartnerJudge` looks at the whole set and says "waiting for keys" only
when every process of it is asleep with nothing on its way to any of them, and some
process of it waits on the session's terminal in a wait that is proof (no timeout of a
second or less). The set starts with the foreground group and its descendants and grows
along the channels the processes wait on:

* a unix socket to another process: its other end holds no bytes for us (the socket's
  own queue is the wake-up check, :mod:`.wakeups`), and the process the kernel recorded
  for the other end (``SO_PEERCRED``), confirmed to hold it now, with no relative of it
  holding it too, joins the set;
* the master of another terminal: nothing written there is unread on either side (bytes
  from the inner programs not yet taken by the master's holder, keys not yet read by
  them; :func:`.borrow.pty_state`), and the inner terminal's foreground group joins the
  set: it is what reads the keys passed on;
* the slave of such an inner terminal, whose master a process of the set holds;
* the process's own event sources, self-pipes and idle listening sockets, as for one
  process (:class:`.channels.ChannelJudge`). Anything else (a TCP socket, a pipe from
  a process outside the set, a device) leaves the set unproven.

Every process is judged whole, as a threaded program is (:meth:`.look.Look.all_threads`):
every thread asleep, no signal queued, each in a wait on the descriptors above or a
``futex`` or a wait for a signal, none ending by itself within a second. The set is
looked at twice, and every thread's run stamp read at the first look must be unchanged
after the second: no process of the set ran from the moment it was first seen until
everything had been checked again, so bytes one of them passed on while the first look
went round are seen the second time, in a channel or in a process awake. At most
:data:`MAX_PROCESSES` processes are judged; a larger set is not proven.

What stays outside: a process outside the set that writes to an inner terminal (a
background job in a tmux pane), as one writing to the session's terminal does beside a
program waiting for keys; a process that got the other end of a socket passed over
another socket. Both are also outside the rule for one process.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable

import attrs

from .borrow import borrowed, pty_state, socket_peer_pid
from .inspector import ReaderWait, TerminalIdentity
from .look import Look, LookContext
from .procfiles import ProcessFiles
from .procfs import iter_pids, read_stat
from .taskfacts import sole_member

__all__ = ["MAX_PROCESSES", "PartnerJudge"]

MAX_PROCESSES = 16
_MAX_THREADS = 64
_MAX_NESTING = 4
_CACHE_MAX = 256
_PTMX = os.makedev(5, 2)  # /dev/ptmx and each devpts instance's ptmx
_PTS_MAJORS = range(136, 144)  # UNIX98_PTY_SLAVE_MAJOR and the majors after it


@attrs.frozen
class _Pass:
    """One look round the set: who was judged (in order), their threads' run stamps, and
    whether some thread waits on the terminal; ``wakes`` summed over every thread."""

    order: tuple[int, ...]
    tasks: tuple[tuple[int, str], ...]
    stamps: tuple[bytes, ...]
    reading: bool
    wakes: int


class _Channels:
    """The partner channels of one pass: accepts them and names who joins the set."""

    def __init__(self, context: LookContext, holders: SocketHolders) -> None:
        self._context = context
        self._holders = holders
        self.joining: list[int] = []
        self.inner: set[tuple[int, int]] = set()
        self.slaves: set[tuple[int, int]] = set()

    def accept(
        self, files: ProcessFiles, fds: Iterable[int], is_terminal: Callable[[int], bool]
    ) -> bool:
        return self._accept(files, list(fds), is_terminal, 0)

    def _accept(
        self,
        files: ProcessFiles,
        fds: list[int],
        is_terminal: Callable[[int], bool],
        depth: int,
    ) -> bool:
        channels = self._context.channels
        for fd in fds:
            if is_terminal(fd) or channels.only_own(files, [fd], is_terminal):
                continue
            link = files.link(fd)
            if link is None:
                return False
            if link == "anon_inode:[eventpoll]":
                nested = channels.watched(files, fd) if depth < _MAX_NESTING else None
                if nested is None or not self._accept(files, nested, is_terminal, depth + 1):
                    return False
            elif link.startswith("socket:["):
                if not self._socket(files, fd, link):
                    return False
            elif not self._terminal_end(files, fd):
                return False
        return True

    def _socket(self, files: ProcessFiles, fd: int, link: str) -> bool:
        """A unix socket whose other end a process holds alone: it joins the set."""
        peers = self._context.channels.peers
        peer = peers.peer_of(_inode(link))
        if peer is None:
            return False
        other = f"socket:[{peer}]"
        holder = self._holders.holder(files.pid, fd, other)
        if holder is None:
            return False
        own = read_stat(holder, self._context.proc)
        if own is None or self._context.channels.held_elsewhere(own, {other}):
            return False
        self.joining.append(holder)
        return True

    def _terminal_end(self, files: ProcessFiles, fd: int) -> bool:
        """The master of another terminal with nothing unread either way (its foreground
        group joins the set), or the slave of one."""
        st = files.stat(fd)
        if st is None or not stat.S_ISCHR(st.st_mode):
            return False
        if os.major(st.st_rdev) in _PTS_MAJORS:
            self.slaves.add((st.st_dev, st.st_ino))
            return True
        if st.st_rdev != _PTMX:
            return False
        with borrowed(files.pid, fd) as copy:
            state = pty_state(copy) if copy is not None else None
        if state is None or state.pending_output or state.unread_input:
            return False
        if state.foreground <= 0:
            return False
        self.inner.add(state.slave)
        members = _members(state.foreground, self._context.proc)
        if members is None:
            return False
        self.joining.extend(members)
        return True


class SocketHolders:
    """Who holds the other end of a unix socket: a process found once, confirmed each time.

    The kernel's record of the other end's creator (``SO_PEERCRED``) is tried first; it
    is wrong where the other end was made by ``socketpair`` before a fork (a tmux client
    starting its server holds the pair's first end, the server the second, and both
    record the client). Then every process's descriptors are read once (the socket's
    holder rarely changes), and the holder found is remembered by socket: one
    ``readlink`` confirms it on later looks.
    """

    def __init__(self, proc: str) -> None:
        self._proc = proc
        self._known: dict[str, tuple[int, int]] = {}  # link -> (pid, fd)

    def holder(self, pid: int, fd: int, other: str) -> int | None:
        """The pid holding ``other``, the socket at the far end of ``pid``'s ``fd``."""
        known = self._known.get(other)
        if known is not None and self._holds(known[0], known[1], other):
            return known[0]
        with borrowed(pid, fd) as copy:
            hint = socket_peer_pid(copy) if copy is not None else None
        found = self._held_by(hint, other) if hint is not None and hint != pid else None
        if found is None:
            found = self._scan(other)
        if found is None:
            return None
        if len(self._known) >= _CACHE_MAX:
            self._known.clear()
        self._known[other] = found
        return found[0]

    def _holds(self, pid: int, fd: int, link: str) -> bool:
        try:
            return os.readlink(f"{self._proc}/{pid}/fd/{fd}") == link
        except OSError:
            return False

    def _held_by(self, pid: int, link: str) -> tuple[int, int] | None:
        try:
            names = os.listdir(f"{self._proc}/{pid}/fd")
        except OSError:
            return None
        for name in names:
            if self._holds(pid, int(name), link):
                return pid, int(name)
        return None

    def _scan(self, link: str) -> tuple[int, int] | None:
        for pid in iter_pids(self._proc):
            found = self._held_by(pid, link)
            if found is not None:
                return found
        return None


class PartnerJudge:
    """Judges a foreground group together with the processes it waits on; see the module
    docstring."""

    def __init__(self, context: LookContext) -> None:
        self._context = context
        self._holders = SocketHolders(context.proc)

    def group_wait(self, members: list[int], terminal: TerminalIdentity) -> ReaderWait | None:
        """The set's wait on ``terminal`` when every process of it is quietly asleep and
        one of them reads the terminal; None otherwise. ``members``: the foreground
        group's processes, its leader first."""
        first = self._pass(members, terminal)
        if first is None or not first.reading:
            return None
        second = self._pass(members, terminal)
        if second is None or (second.order, second.stamps) != (first.order, first.stamps):
            return None
        if self._stamps(first.tasks) != first.stamps:
            return None
        return ReaderWait(wakes=first.wakes, stamp=None)

    def _pass(self, members: list[int], terminal: TerminalIdentity) -> _Pass | None:
        context = self._context
        channels = _Channels(context, self._holders)
        queue = list(members)
        seen = set(queue)
        order: list[int] = []
        tasks: list[tuple[int, str]] = []
        stamps: list[bytes] = []
        reading = False
        wakes = 0
        family_added = False
        while queue or not family_added:
            if not queue:
                family_added = True
                family = self._descendants(members)
                if family is None:
                    return None
                queue = [pid for pid in family if pid not in seen]
                seen.update(queue)
                continue
            pid = queue.pop(0)
            if len(order) >= MAX_PROCESSES:
                return None
            tids = _threads(pid, context.proc)
            if tids is None or len(tids) > _MAX_THREADS:
                return None
            with ProcessFiles(pid, context.proc) as files:
                look = Look(context, files, terminal, polling=False, partners=channels)
                whole = look.all_threads(tids, on_terminal=False)
            if whole is None or whole.polled_ns is not None or whole.wakes is None:
                return None
            reading = reading or whole.reading
            wakes += whole.wakes
            order.append(pid)
            tasks.extend((pid, tid) for tid in tids)
            stamps.extend(whole.stamps)
            for joined in channels.joining:
                if joined not in seen:
                    seen.add(joined)
                    queue.append(joined)
            channels.joining.clear()
        if not channels.slaves <= channels.inner:
            return None  # a process waits on a terminal whose master is outside the set
        return _Pass(
            order=tuple(order),
            tasks=tuple(tasks),
            stamps=tuple(stamps),
            reading=reading,
            wakes=wakes,
        )

    def _descendants(self, members: list[int]) -> list[int] | None:
        """The live descendants of ``members`` (None when more than the set may hold)."""
        found: set[int] = set()
        for pid in members:
            own = read_stat(pid, self._context.proc)
            if own is None:
                return None
            family = self._context.channels.lineage.descendants(pid, own.starttime)
            if family is None:
                return None
            for child, started in family:
                # The list keeps a process that has exited until its pid is reused (a
                # thread id listed there names its process again); a zombie runs nothing any more.
                now = read_stat(child, self._context.proc)
                if now is not None and now.starttime == started and now.state != "Z":
                    found.add(child)
            if len(found) > MAX_PROCESSES:
                return None
        return sorted(found)

    def _stamps(self, tasks: tuple[tuple[int, str], ...]) -> tuple[bytes, ...] | None:
        proc = self._context.proc
        stamps: list[bytes] = []
        for pid, tid in tasks:
            try:
                with open(f"{proc}/{pid}/task/{tid}/schedstat", "rb") as handle:
                    stamps.append(handle.read())
            except OSError:
                return None
        return tuple(stamps)


def _threads(pid: int, proc: str) -> list[str] | None:
    try:
        return sorted(os.listdir(f"{proc}/{pid}/task"))
    except OSError:
        return None


def _members(pgid: int, proc: str) -> list[int] | None:
    """The processes of group ``pgid``, its leader first; None when the leader is gone."""
    if read_stat(pgid, proc) is None:
        return None
    if sole_member(pgid):
        return [pgid]
    members = [pgid]
    for pid in iter_pids(proc):
        if pid != pgid:
            seen = read_stat(pid, proc)
            if seen is not None and seen.pgrp == pgid:
                members.append(pid)
    return members


def _inode(link: str) -> int:
    try:
        return int(link[link.index("[") + 1 : -1])
    except ValueError:
        return 0
