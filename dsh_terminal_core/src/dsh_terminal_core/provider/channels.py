"""Whether the other wake-ups of a terminal wait belong to the waiting process itself.

A process blocked on the terminal *and* on a channel to someone else — a TCP or UDP
socket, a unix socket or pipe whose other end another process holds — may be waiting
for that someone (``ssh``, ``docker exec -it`` and ``kubectl exec -it`` wait like this),
so the wait says nothing about the user. A wait whose only other wake-ups are the
process's own event sources still means "waiting for input": REPLs built on an event
loop watch the terminal next to their own ``eventfd``, ``timerfd``, ``signalfd``,
``inotify`` instance or a self-pipe (a pipe or socketpair both of whose ends they hold).

"Holds both ends" is read from ``/proc``: a pipe is the process's own when it also holds
a descriptor on the same pipe opened for writing (a named pipe opened for reading and
writing at once counts so: fish watches such a one for notices of its universal
variables, which are never input); a unix socket is its own when the
socket at the other end (asked of the kernel, :mod:`.unixdiag`) is among its
descriptors. A listening unix socket with no connection waiting has no other end
(nvim listens on one for its remote API): nothing can arrive on it until someone
connects, which then wakes the wait as keys do. Either way no other process that could
have inherited the other end — a descendant, or an ancestor in the same terminal
session — may hold it too. Anything that cannot be determined (an unreadable table, an
unknown descriptor kind, a socket the kernel will not describe) counts as someone
else's, so the wait is not proof.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable

import attrs

from .lineage import Lineage
from .procfiles import ProcessFiles, epoll_entries
from .procfs import PROC, ProcStat, last_pid, read_stat
from .unixdiag import UnixPeers

__all__ = ["ChannelJudge"]

_EVENT_LINKS = frozenset(
    {"anon_inode:[eventfd]", "anon_inode:[timerfd]", "anon_inode:[signalfd]", "anon_inode:inotify"}
)
_EPOLL_LINK = "anon_inode:[eventpoll]"
_MAX_NESTING = 4  # epoll instances watching epoll instances
_MAX_RELATIVES = 64  # processes looked through for a copy of the other end
_MAX_ANCESTORS = 16
_CACHE_MAX = 256


@attrs.frozen
class _Verdict:
    """Who else held the other ends when last looked, the newest pid at that time, and
    the relatives already looked at."""

    holder: int | None
    last_pid: int | None
    checked: frozenset[tuple[int, int]]  # (pid, starttime)


class ChannelJudge:
    """Decides whether descriptors in a wait are all the waiting process's own."""

    def __init__(self, proc: str = PROC, peers: UnixPeers | None = None) -> None:
        self._proc = proc
        self._peers = peers if peers is not None else UnixPeers()
        self._verdicts: dict[tuple[int, int, frozenset[str]], _Verdict] = {}
        self._ends: dict[tuple[int, int, str], int] = {}
        self._lineage = Lineage(proc)

    @property
    def peers(self) -> UnixPeers:
        """The socket diagnostics this judge asks (shared with the wake-up checks)."""
        return self._peers

    def only_own(
        self,
        files: ProcessFiles,
        fds: Iterable[int],
        is_terminal: Callable[[int], bool],
        *,
        shared_fifos: bool = False,
    ) -> bool:
        """True if every fd in ``fds`` is the terminal or one of the process's own event
        sources, so nothing but the user or the process itself can end the wait.

        ``shared_fifos``: the process's program declares that the named pipes it opens
        for reading and writing are a meeting point of all its instances (fish's
        universal-variable notifier: every fish of the user opens the same one by its
        path). A relative holding such a pipe then says nothing, as an unrelated
        process holding it never does: it opened the pipe itself rather than
        inheriting this process's end.
        """
        pipes: set[str] = set()
        peers: set[str] = set()
        if not self._sort(files, fds, is_terminal, pipes, peers, 0):
            return False
        if not pipes and not peers:
            return True
        own = read_stat(files.pid, self._proc)
        if own is None:
            return False
        for link in pipes:
            if not self._holds_end(files, own.starttime, link, writer=True):
                return False
        for link in peers:
            if not self._holds_end(files, own.starttime, link, writer=False):
                return False
        if shared_fifos:
            pipes = {link for link in pipes if not link.startswith("/")}
            if not pipes and not peers:
                return True
        return not self._held_elsewhere(own, pipes | peers)

    def _holds_end(self, files: ProcessFiles, starttime: int, link: str, *, writer: bool) -> bool:
        """True if the process holds ``link`` (for a pipe: opened for writing).

        The descriptor found last time is checked first (one ``fdinfo`` or ``readlink``),
        so a REPL's self-pipes cost a full descriptor-table read only once.
        """
        key = (files.pid, starttime, link)
        known = self._ends.get(key)
        if known is not None and self._is_end(files, known, link, writer=writer):
            return True
        table = files.table()
        if table is None:
            return False
        for fd in table.get(link, ()):
            if self._is_end(files, fd, link, writer=writer):
                if len(self._ends) >= _CACHE_MAX:
                    self._ends.clear()
                self._ends[key] = fd
                return True
        return False

    @staticmethod
    def _is_end(files: ProcessFiles, fd: int, link: str, *, writer: bool) -> bool:
        if files.link(fd) != link:
            return False
        return not writer or files.writable(fd)

    def _sort(
        self,
        files: ProcessFiles,
        fds: Iterable[int],
        is_terminal: Callable[[int], bool],
        pipes: set[str],
        peers: set[str],
        depth: int,
    ) -> bool:
        """Check what can be judged alone; collect the pipes and socket peers whose other
        end must be found. False as soon as one descriptor is someone else's."""
        for fd in fds:
            if is_terminal(fd):
                continue
            link = files.link(fd)
            if link is None:
                return False
            if link in _EVENT_LINKS:
                continue
            if link.startswith("pipe:["):
                pipes.add(link)
                continue
            if link.startswith("socket:["):
                peer = self._peers.peer_of(_inode(link))
                if peer is None:
                    if self._peers.idle_listener(_inode(link)):
                        continue  # a unix server socket nobody is connecting to (nvim's)
                    return False  # not a connected unix socket of this namespace
                peers.add(f"socket:[{peer}]")
                continue
            if link == _EPOLL_LINK:
                nested = self._watched(files, fd) if depth < _MAX_NESTING else None
                if nested is None or not self._sort(
                    files, nested, is_terminal, pipes, peers, depth + 1
                ):
                    return False
                continue
            if link.startswith("/"):
                # A regular file or directory is always ready, so it never holds a wait.
                st = files.stat(fd)
                if st is not None and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    continue
                if st is not None and stat.S_ISFIFO(st.st_mode):
                    pipes.add(link)  # a named pipe: judged as a pipe, by its own ends
                    continue
            return False
        return True

    @property
    def lineage(self) -> Lineage:
        """Who descends from whom (shared with the look at processes joined by channels)."""
        return self._lineage

    def held_elsewhere(self, own: ProcStat, links: set[str]) -> bool:
        """True if a relative of ``own`` holds any of ``links``, or that cannot be ruled out."""
        return self._held_elsewhere(own, links)

    def watched(self, files: ProcessFiles, epfd: int) -> list[int] | None:
        """The descriptors the epoll instance ``epfd`` watches, armed; None if unreadable."""
        return self._watched(files, epfd)

    def _watched(self, files: ProcessFiles, epfd: int) -> list[int] | None:
        info = files.info(epfd)
        entries = epoll_entries(info) if info is not None else None
        if entries is None:
            return None
        watched: list[int] = []
        for entry in entries:
            if not entry.armed:
                continue
            st = files.stat(entry.fd)
            if st is None or st.st_ino != entry.inode:
                return None  # the number now names another file: the watched one is unseen
            watched.append(entry.fd)
        return watched

    def _held_elsewhere(self, own: ProcStat, links: set[str]) -> bool:
        """True if a relative of ``own`` holds any of ``links``, or that cannot be ruled out.

        Relatives can only come to hold a copy by inheriting it, so each is looked at
        once per set of links: ancestors on the first look, descendants as they appear
        (:class:`.lineage.Lineage`). While no process has been created anywhere since the
        last look (:func:`last_pid` unchanged) nothing needs looking at; a holder found
        is looked at again until it lets go.
        """
        key = (own.pid, own.starttime, frozenset(links))
        stamp = last_pid(self._proc)
        known = self._verdicts.get(key)
        if known is not None and known.holder is not None:
            if self._holds(known.holder, links):
                return True
            known = None  # it let go: look at every relative again
        if known is not None and stamp is not None and known.last_pid == stamp:
            return False
        checked = known.checked if known is not None else frozenset()
        candidates: list[tuple[int, int]] = []
        if known is None:
            ancestors = self._ancestors(own)
            if ancestors is None:
                return True
            candidates += ancestors
        descendants = self._lineage.descendants(own.pid, own.starttime)
        if descendants is not None and len(descendants) > _MAX_RELATIVES:
            # The list keeps processes that have exited (a login shell's start-up leaves
            # dozens): only the live ones can hold anything.
            descendants = [who for who in descendants if self._alive(who)]
        if descendants is None or len(descendants) > _MAX_RELATIVES:
            self._verdicts.pop(key, None)
            return True
        candidates += [who for who in descendants if who not in checked]
        holder = next((pid for pid, _ in candidates if self._holds(pid, links)), None)
        if len(self._verdicts) >= _CACHE_MAX:
            self._verdicts.clear()
        self._verdicts[key] = _Verdict(
            holder=holder, last_pid=stamp, checked=checked | frozenset(candidates)
        )
        return holder is not None

    def _alive(self, who: tuple[int, int]) -> bool:
        now = read_stat(who[0], self._proc)
        return now is not None and now.starttime == who[1]

    def _holds(self, pid: int, links: set[str]) -> bool:
        base = f"{self._proc}/{pid}/fd"
        try:
            names = os.listdir(base)
        except (FileNotFoundError, ProcessLookupError):
            return False  # gone: it holds nothing any more
        except OSError:
            return True  # unreadable: cannot be ruled out
        for name in names:
            try:
                if os.readlink(f"{base}/{name}") in links:
                    return True
            except OSError:
                continue
        return False

    def _ancestors(self, own: ProcStat) -> list[tuple[int, int]] | None:
        """``(pid, starttime)`` of the ancestors of ``own`` inside its session (None if
        the chain is too long)."""
        ancestors: list[tuple[int, int]] = []
        parent = own.ppid
        for _ in range(_MAX_ANCESTORS):
            if parent <= 1 or own.session == own.pid:
                return ancestors
            up = read_stat(parent, self._proc)
            if up is None or up.session != own.session:
                return ancestors
            ancestors.append((parent, up.starttime))
            if parent == own.session:
                return ancestors
            parent = up.ppid
        return None


def _inode(link: str) -> int:
    """The inode in ``socket:[123]``; 0 if malformed."""
    try:
        return int(link[link.index("[") + 1 : -1])
    except ValueError:
        return 0
