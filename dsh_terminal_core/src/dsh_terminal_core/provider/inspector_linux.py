"""The exact stdin-wait probe for Linux, read from ``/proc``.

A thread is "reading the terminal" only if ``/proc/<pid>/task/<tid>/syscall`` shows it
blocked in a call that waits for input on a descriptor referring to the session's PTY
slave:

* ``read``/``readv`` on such a descriptor;
* ``select``/``pselect6`` with its bit set in the read set (read from ``/proc/<pid>/mem``);
* ``poll``/``ppoll`` with a ``struct pollfd`` for it asking for ``POLLIN``/``POLLRDNORM``;
* ``epoll_wait``/``epoll_pwait``/``epoll_pwait2`` on an epoll instance whose
  ``/proc/<pid>/fdinfo`` lists it with ``EPOLLIN``/``EPOLLRDNORM``.

"Refers to the terminal" compares the descriptor's target (device, inode) with the
slave's, so fd 0 counts wherever devpts is mounted. ``getpass``, ``sudo`` and ``ssh`` open
``/dev/tty`` and read fd 3; that descriptor's link names the ``/dev/tty`` node itself (not
``/dev/pts/N``), and it counts when the reader's controlling terminal is the slave.

Such a wait is proof that the program waits for the user only if nothing else can end
it soon:

* its timeout (``poll``'s milliseconds, the ``select``/``pselect6``/``ppoll`` time read
  from the process's memory, ``epoll_wait``'s milliseconds) does not run out within
  :data:`SHORT_WAIT_NS` — a program polling its keyboard every 100 ms may be busy;
* every other descriptor it waits on is its own (:class:`.channels.ChannelJudge`): a
  wait on the terminal *and* a socket or another process's pipe may be a wait for the
  network, as ``ssh`` and ``docker exec -it`` do.

A wait that fails only the first rule is a *polling* wait (:class:`.inspector.PollingWait`):
``top -d 1``, ``htop -d 5`` and curses programs with a key timeout come back to one every
period. :meth:`LinuxStdinProbe.group_wait` describes it for a group that is its
single-threaded leader alone and holds no channel to anyone else, with what a caller
needs to tell an idle poller from a busy one over several looks (its wake count, how
long it was busy); the same look answers the proof question, so only a leader in such a
wait pays for the extra reads.

A process with more than one thread is judged whole (:meth:`.look.Look.all_threads`): one
thread reading the terminal proves nothing while another is still working on the keys it
passed on (nvim's input thread is back in its wait 3-6 ms before the main thread has run
``:q!``). Every thread must be asleep (state ``S``) with no signal queued for it or the
process, in a wait that is proof of nothing but the user: the terminal read itself, a
wait on the process's own descriptors with none of them readable (:mod:`.wakeups`) and no
timeout within :data:`SHORT_WAIT_NS`, a ``futex`` (a thread waiting for another of its
threads, all of which are asleep too) or a wait for a signal (none queued; vim's timer
thread), each with no such timeout. Every thread's run stamp is
read before the look and again after it: unchanged, no thread ran while we looked. A
thread asleep elsewhere until a short, known timeout (Go's runtime ticks every 100 ms)
makes the process a poller: judged over several looks, never proof at one.

When no member of the foreground group reads the terminal by itself, the group may wait
for keys together with the processes it waits on (mc's subshell, a nested tmux's server,
screen's backend): :class:`.partners.PartnerJudge` judges that whole set.

Every positive answer is confirmed by the thread's scheduler statistics, read before its
syscall line and again at the end: if the thread ran while we looked (it may re-enter
the same call with the same arguments after rewriting its descriptor sets), the answer
is False. Anything unreadable, any architecture
without a table and any non-64-bit process is a miss, never a guess.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterable
from typing import Literal

from . import lookparts as parts
from .borrow import drained_pipe
from .channels import ChannelJudge
from .inspector import PollingWait, QuietHelpers, ReaderWait, ShellHelpers, TerminalIdentity
from .look import SHORT_WAIT_NS, Look
from .lookparts import GENERAL, Handover, Polled
from .partners import PartnerJudge
from .procfiles import KeptFiles, ProcessFiles
from .procfs import PROC, iter_pids, read_bytes, read_stat
from .syscalls import SyscallTable, Wait, current_table
from .taskfacts import executable_id, reaped_cpu, sole_member, wakes_in, write_calls

__all__ = ["GENERAL", "SHORT_WAIT_NS", "LinuxStdinProbe"]

_ELF64_HEADER = b"\x7fELF\x02"
_ELF_CACHE_MAX = 256
# Character devices that never hold anyone's news: null, zero, full, random, urandom.
_INERT_DEVICES = frozenset(os.makedev(1, minor) for minor in (3, 5, 7, 8, 9))
# A polling process with more descriptors than this is not judged (one look reads them all).
_MAX_POLLING_FDS = 256
_TICK_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") or 100)
# The threads of one process looked at; a larger process is not judged (one look reads
# every thread's files).
_MAX_THREADS = 64


class LinuxStdinProbe:
    """Exact probe over ``/proc``; ``table`` None (an unlisted architecture) means False."""

    def __init__(
        self,
        table: SyscallTable | None = None,
        proc: str = PROC,
        channels: ChannelJudge | None = None,
    ) -> None:
        self._table = table if table is not None else current_table()
        self._proc = proc
        self._channels = channels if channels is not None else ChannelJudge(proc)
        self._elf64: dict[tuple[int, int, int], bool] = {}
        self._partners = PartnerJudge(self)

    # What a :class:`.look.Look` reads through (its :class:`.look.LookContext`); a look is
    # only made where the table exists.
    @property
    def table(self) -> SyscallTable:
        assert self._table is not None
        return self._table

    @property
    def channels(self) -> ChannelJudge:
        return self._channels

    @property
    def proc(self) -> str:
        return self._proc

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        """Identify the slave of ``master_fd`` without depending on where devpts is mounted.

        Opens the peer with ``TIOCGPTPEER`` (Linux 4.13+) just long enough to ``fstat`` it;
        falls back to ``TIOCGPTN`` and ``/dev/pts/<n>``.
        """
        if self._table is None:
            return None
        number = parts.pty_number(master_fd, self._table.tiocgptn)
        path = f"/dev/pts/{number}" if number is not None else "/dev/pts/?"
        flags = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC
        try:
            peer = fcntl.ioctl(master_fd, self._table.tiocgptpeer, flags)
        except OSError:
            peer = -1
        try:
            st = os.fstat(peer) if peer >= 0 else os.stat(path)
        except OSError:
            return None
        finally:
            if peer >= 0:
                os.close(peer)
        return TerminalIdentity(device=st.st_dev, inode=st.st_ino, rdev=st.st_rdev, path=path)

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        """Return True only if some thread of ``pid`` is blocked reading ``terminal``."""
        return self.reader_wait(pid, terminal) is not None

    def reader_wait(
        self,
        pid: int,
        terminal: TerminalIdentity,
        kept: KeptFiles | None = None,
        helpers: ShellHelpers | None = None,
    ) -> ReaderWait | None:
        """Describe ``pid``'s wait if some thread of it is blocked reading ``terminal``.

        A single-threaded process (a shell) costs one look: the run stamp that brackets
        its thread's syscall line is the wait's stamp, and its wake count is in it. For
        a threaded process the main thread's wake count is read on both sides of the
        look, and a count that moved means the look saw no single wait (None). ``kept``:
        files held open across looks, used when they are ``pid``'s. ``helpers``: waits
        its helper threads may sit in, when ``pid`` runs that executable.
        """
        if self._table is None:
            return None
        if kept is not None and kept.pid == pid:
            # The shell at its prompt, asked on nearly every send: one stat says it has a
            # single thread (``task`` links to itself, its parent and that thread).
            try:
                single = os.stat(kept.task_dir).st_nlink == 3
            except OSError:
                return None
            if single:
                seen = self._kept_reader_wait(kept, terminal)
                if seen is not GENERAL:
                    return seen
        tids = self._threads(pid)
        if tids is None:
            return None
        quiet = _declared(pid, helpers)
        if tids == [str(pid)]:
            stamps = self._reading_stamps(
                pid, tids, terminal, first_only=True, kept=kept, helpers=quiet
            )
            if not stamps:
                return None
            return ReaderWait(wakes=wakes_in(stamps[0]), stamp=stamps[0])
        if len(tids) > _MAX_THREADS:
            return None
        with ProcessFiles(pid, self._proc, kept) as files:
            whole = Look(self, files, terminal, polling=False, helpers=quiet).all_threads(tids)
        if whole is None or not whole.reading:
            return None
        return ReaderWait(wakes=whole.wakes, stamp=None)

    def _kept_reader_wait(
        self, kept: KeptFiles, terminal: TerminalIdentity
    ) -> ReaderWait | Literal[Handover.GENERAL] | None:
        """The general look, specialised for the shell at its prompt: a single-threaded
        64-bit process whose files are kept, blocked in ``read`` on the terminal or in a
        ``select`` that reads only the terminal, with no other set and no timeout.

        That is what the prompt proof sees on nearly every send, so it is answered with
        the same reads and checks as the general look, without building one. Anything
        else (another call, another descriptor, a timeout, a 32-bit stack) returns
        ``GENERAL``: the general look decides.
        """
        table = self._table
        assert table is not None
        before = kept.read("schedstat")
        if before is None:
            return GENERAL  # no scheduler statistics here: the general look's stamp
        line = kept.read("syscall")
        # Parsed as bytes, only as far as this look needs: ``nr arg0..arg5 sp pc``.
        if line is None:
            return None
        fields = line.split()
        if len(fields) < 9 or fields[0] == b"running":
            return None
        try:
            number = int(fields[0])
            call = table.waits.get(number)
            if call is None or number < 0:
                return None
            if int(fields[7], 16) <= 0xFFFFFFFF:
                return GENERAL
            first = int(fields[1], 16)
            if call.kind is Wait.READ:
                fds = [first]
            elif call.kind is Wait.SELECT and not (
                int(fields[3], 16) or int(fields[4], 16) or int(fields[5], 16)
            ):
                address = int(fields[2], 16)
                if not 0 < first <= 64 or address == 0:
                    return GENERAL
                bitmap = kept.memory(address, (first + 7) // 8)
                if bitmap is None:
                    return None
                fds = [0] if bitmap == b"\x01" else parts.set_bits(bitmap, first)
                if not fds:
                    return None
            else:
                return GENERAL
        except ValueError:
            return None
        for fd in fds:
            try:
                st = os.stat(kept.fd_path(fd))
            except OSError:
                return GENERAL
            if st.st_ino != terminal.inode or st.st_dev != terminal.device:
                return GENERAL
        if kept.read("schedstat") != before:
            return None
        return ReaderWait(wakes=wakes_in(before), stamp=before)

    def group_reader(self, pgid: int, terminal: TerminalIdentity) -> ReaderWait | None:
        """The wait of the first member of ``pgid`` found reading ``terminal``, or None.

        ``wakes`` is that member's wake count, summed over every thread. The group
        leader is tried first because it is usually the one reading; the rest of the
        group costs one scan of ``/proc``, in pid order, unless the group is provably its
        leader alone. ``stamp`` is set only when the leader itself is single-threaded and
        blocked reading: unchanged later, the leader is still in this very wait.
        """
        found = self._group(pgid, terminal, polling=False)
        return found if isinstance(found, ReaderWait) else None

    def group_wait(
        self, pgid: int, terminal: TerminalIdentity, helpers: ShellHelpers | None = None
    ) -> ReaderWait | PollingWait | None:
        """:meth:`group_reader`'s answer, or else the leader's :class:`.PollingWait`.

        The polling answer is given only for a group that is provably its leader alone,
        the leader single-threaded, every descriptor it holds its own (the terminal, its
        own event sources and self-pipes, regular files, ``/dev/null`` and its kin), and
        the leader's run stamp unchanged from before its system call was read until after
        its descriptors and statistics were: all of it describes one wait. ``helpers``
        as for :meth:`reader_wait`.
        """
        return self._group(pgid, terminal, polling=True, helpers=helpers)

    def _group(
        self,
        pgid: int,
        terminal: TerminalIdentity,
        *,
        polling: bool,
        helpers: ShellHelpers | None = None,
    ) -> ReaderWait | PollingWait | None:
        if self._table is None or pgid <= 0:
            return None
        found = self._member_wait(pgid, terminal, leader=True, polling=polling, helpers=helpers)
        if isinstance(found, ReaderWait):
            return found
        members = [pgid]
        if sole_member(pgid):
            # A group of its leader alone (a command printing output, say) has no other
            # member to find: a few reads instead of a scan of every process. Were a
            # member missed (an orphan of the leader's still in its group), the answer
            # would be "not reading", which never settles a send wrongly.
            if found is not None:
                return self._polling_wait(found)
        else:
            for pid in sorted(self._members(pgid)):
                member = self._member_wait(pid, terminal, leader=False, helpers=helpers)
                if isinstance(member, ReaderWait):
                    return member
                members.append(pid)
            if polling and len(members) == 2 and read_stat(pgid, self._proc) is None:
                # The leader has exited and one process is left (``seq 100 | fzf`` once
                # seq is done): that process is the group alone, and may be polling.
                alone = self._member_wait(members[1], terminal, leader=True, polling=True)
                if isinstance(alone, Look):
                    return self._polling_wait(alone)
        # No member reads the terminal alone: it may wait for keys together with the
        # processes it waits on (mc's subshell, a nested tmux's server, screen's backend).
        return self._partners.group_wait(members, terminal)

    def _member_wait(
        self,
        pid: int,
        terminal: TerminalIdentity,
        *,
        leader: bool,
        polling: bool = False,
        helpers: ShellHelpers | None = None,
    ) -> ReaderWait | Look | None:
        """Summed wake counts of ``pid``'s threads reading ``terminal``; None if none is.

        With ``polling`` (the leader only), a single-threaded ``pid`` seen in a polling
        wait gives back the look that saw it, for :meth:`_polling_wait` to finish once
        the group is known to be the leader alone.
        """
        if self._table is None:
            return None
        tids = self._threads(pid)
        if tids is None:
            return None
        quiet = _declared(pid, helpers)
        if tids != [str(pid)]:
            return self._threads_wait(
                pid, tids, terminal, polling=polling and leader, helpers=quiet
            )
        single = leader
        with ProcessFiles(pid, self._proc) as files:
            look = Look(self, files, terminal, polling=polling and single, helpers=quiet)
            stamps = [stamp for stamp in map(look.reading_stamp, tids) if stamp is not None]
            if not stamps:
                return look if look.polled is not None else None
        wakes = sum(wakes_in(stamp) or 0 for stamp in stamps)
        return ReaderWait(wakes=wakes, stamp=stamps[0] if single else None)

    def _threads_wait(
        self,
        pid: int,
        tids: list[str],
        terminal: TerminalIdentity,
        *,
        polling: bool,
        helpers: QuietHelpers | None = None,
    ) -> ReaderWait | Look | None:
        """:meth:`_member_wait` for a process with more than one thread: judged whole.

        Its wake count is summed over every thread, so a later look at the same waiting
        process sees it moved once any thread ran. A process polling the terminal gives
        back its look (with ``polling``), as a single-threaded one does.
        """
        if len(tids) > _MAX_THREADS:
            return None
        with ProcessFiles(pid, self._proc) as files:
            look = Look(self, files, terminal, polling=polling, helpers=helpers)
            seen = look.all_threads(tids)
            if seen is None:
                return None
            if seen.reading:
                return ReaderWait(wakes=seen.wakes, stamp=None)
            if not polling or seen.polled_ns is None:
                return None
            look.polled = Polled(
                timeout_ns=seen.polled_ns,
                stamp=b"".join(seen.stamps),
                tids=tuple(tids),
                wakes=seen.wakes,
                busy_ns=seen.busy_ns,
            )
            return look

    def _polling_wait(self, look: Look) -> PollingWait | None:
        """Finish a look that found the (single-threaded) process in a polling wait.

        The run stamp read last closes the bracket the look opened before the system
        call: unchanged, the process sat in that wait through every read since, the
        group's membership and its descriptors included.
        """
        polled = look.polled
        assert polled is not None
        files = look.files
        if not self._holds_only_own(look):
            return None
        cpu = reaped_cpu(files.pid, self._proc)
        writes = write_calls(files.pid, self._proc)
        busy_ns = polled.busy_ns
        if cpu is None or writes is None or busy_ns is None:
            return None
        if look.stamp_of(polled.tids) != polled.stamp:
            return None
        started, children_ticks = cpu
        return PollingWait(
            pid=files.pid,
            started=started,
            timeout_ns=polled.timeout_ns,
            wakes=polled.wakes,
            busy_ns=busy_ns + children_ticks * _TICK_NS,
            writes=writes,
        )

    def _holds_only_own(self, look: Look) -> bool:
        """Every descriptor the process holds is the terminal, inert, or its own.

        A poller that holds a channel to someone else (a socket, another process's pipe,
        another terminal, a device) may spend the time between its key polls waiting for
        that someone, which no CPU count shows.
        """
        files = look.files
        table = files.table()
        if table is None:
            return False
        fds = [fd for numbers in table.values() for fd in numbers]
        if len(fds) > _MAX_POLLING_FDS:
            return False
        others = []
        for fd in fds:
            if look.refers(fd):
                continue
            st = files.stat(fd)
            if st is not None and stat.S_ISCHR(st.st_mode) and st.st_rdev in _INERT_DEVICES:
                continue
            link = files.link(fd)
            if link is not None and link.startswith("pipe:[") and drained_pipe(files.pid, fd):
                continue  # its writers are gone and it is empty: nothing can come (seq | fzf)
            others.append(fd)
        return self._channels.only_own(files, others, look.refers)

    def _threads(self, pid: int) -> list[str] | None:
        """``pid``'s thread ids; one ``stat`` when it has a single thread (the common case:
        ``/proc/<pid>/task`` then links to itself, its parent and one thread)."""
        task = f"{self._proc}/{pid}/task"
        try:
            if os.stat(task).st_nlink == 3:
                return [str(pid)]
            return os.listdir(task)
        except OSError:
            return None

    def _reading_stamps(
        self,
        pid: int,
        tids: list[str],
        terminal: TerminalIdentity,
        *,
        first_only: bool,
        kept: KeptFiles | None = None,
        helpers: QuietHelpers | None = None,
    ) -> list[bytes]:
        """The run stamps of ``pid``'s threads seen blocked reading ``terminal``."""
        stamps: list[bytes] = []
        with ProcessFiles(pid, self._proc, kept) as files:
            look = Look(self, files, terminal, polling=False, helpers=helpers)
            for tid in tids:
                stamp = look.reading_stamp(tid)
                if stamp is not None:
                    stamps.append(stamp)
                    if first_only:
                        break
        return stamps

    def _members(self, pgid: int) -> Iterable[int]:
        for pid in iter_pids(self._proc):
            if pid == pgid:
                continue
            stat = read_stat(pid, self._proc)
            if stat is not None and stat.pgrp == pgid:
                yield pid

    def is_64bit(self, pid: int) -> bool:
        """True if ``pid`` runs a 64-bit executable (its syscall numbers are the table's).

        A 32-bit (compat) process reports syscall numbers from another table. The answer
        belongs to the executable, so it is remembered per file: one stat per probe
        instead of reading the ELF header every time.
        """
        path = f"{self._proc}/{pid}/exe"
        try:
            st = os.stat(path)
        except OSError:
            return False
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        known = self._elf64.get(key)
        if known is None:
            header = read_bytes(path, 5)
            if header is None:
                return False
            known = header[:5] == _ELF64_HEADER
            if len(self._elf64) >= _ELF_CACHE_MAX:
                self._elf64.clear()
            self._elf64[key] = known
        return known


def _declared(pid: int, helpers: ShellHelpers | None) -> QuietHelpers | None:
    """The helper waits declared for ``pid``'s executable; None when it runs another.

    Asked only of a process with more than one thread, so a shell at its prompt with no
    helper running pays nothing for it.
    """
    if helpers is None or executable_id(pid) != helpers.executable:
        return None
    return helpers.waits
