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

A process with more than one thread is judged whole (:meth:`_Look.all_threads`): one
thread reading the terminal proves nothing while another is still working on the keys it
passed on (nvim's input thread is back in its wait 3-6 ms before the main thread has run
``:q!``). Every thread must be asleep (state ``S``) with no signal queued for it or the
process, in a wait that is proof of nothing but the user: the terminal read itself, a
wait on the process's own descriptors with none of them readable (:mod:`.wakeups`) and no
timeout within :data:`SHORT_WAIT_NS`, a ``futex`` (a thread waiting for another of its
threads, all of which are asleep too) or a wait for a signal (none queued; vim's timer
thread), each with no such timeout. Every thread's run stamp is
read before the look and again after it: unchanged, no thread ran while we looked.

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
import struct
import time
from collections.abc import Iterable
from typing import Literal

from . import lookparts as parts
from .channels import ChannelJudge
from .inspector import PollingWait, ReaderWait, TerminalIdentity
from .lookparts import GENERAL, Handover, Polled, Threads, WaitSet
from .procfiles import KeptFiles, ProcessFiles, epoll_entries
from .procfs import PROC, iter_pids, read_bytes, read_stat
from .syscalls import Limit, SyscallTable, Wait, WaitCall, current_table
from .taskfacts import busy_ns_in, reaped_cpu, sole_member, wakes_in, write_calls
from .wakeups import has_pending_wakeup

__all__ = ["GENERAL", "SHORT_WAIT_NS", "LinuxStdinProbe"]

SHORT_WAIT_NS = 1_000_000_000  # a wait that ends by itself this soon is not proof
_POLL_READ = 0x0001 | 0x0040  # POLLIN | POLLRDNORM
_EPOLL_READ = 0x0001 | 0x0040  # EPOLLIN | EPOLLRDNORM
_POLLFD = struct.Struct("<ihh")  # struct pollfd {int fd; short events; short revents;}
_TIME = struct.Struct("<qq")  # struct timespec / struct timeval on 64-bit Linux
_MAX_POLLFDS = 65536  # bounds one memory read; larger arrays are not inspected past it
_MAX_SELECT_FDS = 1 << 20
_ELF64_HEADER = b"\x7fELF\x02"
_DEV_TTY = os.makedev(5, 0)  # /dev/tty: "my controlling terminal"
_ELF_CACHE_MAX = 256
# Character devices that never hold anyone's news: null, zero, full, random, urandom.
_INERT_DEVICES = frozenset(os.makedev(1, minor) for minor in (3, 5, 7, 8, 9))
# A polling process with more descriptors than this is not judged (one look reads them all).
_MAX_POLLING_FDS = 256
_TICK_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") or 100)
# futex operations that put a thread to sleep, and how each states its timeout.
_FUTEX_CMD_MASK = ~(128 | 256)  # FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME
_FUTEX_CLOCK_REALTIME = 256
_FUTEX_RELATIVE = frozenset({0})  # FUTEX_WAIT
_FUTEX_ABSOLUTE = frozenset({9, 11, 13})  # WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2
_FUTEX_LOCK_PI = 6  # absolute, always CLOCK_REALTIME
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
        self, pid: int, terminal: TerminalIdentity, kept: KeptFiles | None = None
    ) -> ReaderWait | None:
        """Describe ``pid``'s wait if some thread of it is blocked reading ``terminal``.

        A single-threaded process (a shell) costs one look: the run stamp that brackets
        its thread's syscall line is the wait's stamp, and its wake count is in it. For
        a threaded process the main thread's wake count is read on both sides of the
        look, and a count that moved means the look saw no single wait (None). ``kept``:
        files held open across looks, used when they are ``pid``'s.
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
        if tids == [str(pid)]:
            stamps = self._reading_stamps(pid, tids, terminal, first_only=True, kept=kept)
            if not stamps:
                return None
            return ReaderWait(wakes=wakes_in(stamps[0]), stamp=stamps[0])
        if len(tids) > _MAX_THREADS:
            return None
        with ProcessFiles(pid, self._proc, kept) as files:
            whole = _Look(self, files, terminal, polling=False).all_threads(tids)
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

    def group_wait(self, pgid: int, terminal: TerminalIdentity) -> ReaderWait | PollingWait | None:
        """:meth:`group_reader`'s answer, or else the leader's :class:`.PollingWait`.

        The polling answer is given only for a group that is provably its leader alone,
        the leader single-threaded, every descriptor it holds its own (the terminal, its
        own event sources and self-pipes, regular files, ``/dev/null`` and its kin), and
        the leader's run stamp unchanged from before its system call was read until after
        its descriptors and statistics were: all of it describes one wait.
        """
        return self._group(pgid, terminal, polling=True)

    def _group(
        self, pgid: int, terminal: TerminalIdentity, *, polling: bool
    ) -> ReaderWait | PollingWait | None:
        if self._table is None or pgid <= 0:
            return None
        found = self._member_wait(pgid, terminal, leader=True, polling=polling)
        if isinstance(found, ReaderWait):
            return found
        if sole_member(pgid):
            # A group of its leader alone (a command printing output, say) has no other
            # member to find: a few reads instead of a scan of every process. Were a
            # member missed (an orphan of the leader's still in its group), the answer
            # would be "not reading", which never settles a send wrongly.
            return self._polling_wait(found) if found is not None else None
        for pid in sorted(self._members(pgid)):
            member = self._member_wait(pid, terminal, leader=False)
            if isinstance(member, ReaderWait):
                return member
        return None

    def _member_wait(
        self, pid: int, terminal: TerminalIdentity, *, leader: bool, polling: bool = False
    ) -> ReaderWait | _Look | None:
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
        if tids != [str(pid)]:
            return self._threads_wait(pid, tids, terminal, polling=polling and leader)
        single = leader
        with ProcessFiles(pid, self._proc) as files:
            look = _Look(self, files, terminal, polling=polling and single)
            stamps = [stamp for stamp in map(look.reading_stamp, tids) if stamp is not None]
            if not stamps:
                return look if look.polled is not None else None
        wakes = sum(wakes_in(stamp) or 0 for stamp in stamps)
        return ReaderWait(wakes=wakes, stamp=stamps[0] if single else None)

    def _threads_wait(
        self, pid: int, tids: list[str], terminal: TerminalIdentity, *, polling: bool
    ) -> ReaderWait | _Look | None:
        """:meth:`_member_wait` for a process with more than one thread: judged whole.

        Its wake count is summed over every thread, so a later look at the same waiting
        process sees it moved once any thread ran. A process polling the terminal gives
        back its look (with ``polling``), as a single-threaded one does.
        """
        if len(tids) > _MAX_THREADS:
            return None
        with ProcessFiles(pid, self._proc) as files:
            look = _Look(self, files, terminal, polling=polling)
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

    def _polling_wait(self, look: _Look) -> PollingWait | None:
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

    def _holds_only_own(self, look: _Look) -> bool:
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
    ) -> list[bytes]:
        """The run stamps of ``pid``'s threads seen blocked reading ``terminal``."""
        stamps: list[bytes] = []
        with ProcessFiles(pid, self._proc, kept) as files:
            look = _Look(self, files, terminal, polling=False)
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


class _Look:
    """One look at the threads of one process, sharing what was read about its files."""

    def __init__(
        self,
        probe: LinuxStdinProbe,
        files: ProcessFiles,
        terminal: TerminalIdentity,
        *,
        polling: bool,
    ) -> None:
        assert probe._table is not None
        self._table = probe._table
        self._is_64bit = probe.is_64bit
        self._channels = probe._channels
        self._proc = probe._proc
        self._files = files
        self.main = str(files.pid)
        self._terminal = terminal
        self._refers: dict[int, bool] = {}
        # Asked for polling waits: the main thread's is kept in ``polled`` when found.
        self._polling = polling
        self.polled: Polled | None = None

    @property
    def files(self) -> ProcessFiles:
        return self._files

    def reading_stamp(self, tid: str) -> bytes | None:
        """Thread ``tid``'s run stamp if it is blocked reading the terminal in a wait that
        is proof; None otherwise.

        The stamp (the thread's scheduler statistics) is read before its syscall line
        and again at the end: unchanged, the thread did not run in between, so the
        syscall line, the descriptor sets and the timeout read from its memory all belong
        to one wait. (A thread that re-enters ``select`` rewrites its sets first, usually
        with the same syscall line, so the line alone cannot tell.)

        When the look was asked for polling waits and the main thread's wait fails only
        by its timeout (a positive one, read), that wait is kept in :attr:`polled`.
        """
        before = self.runs(tid)
        if before is None:
            return None
        found = self._syscall(tid)
        if found is None:
            return None
        number, args = found
        call = self._table.waits.get(number)
        if call is None:
            return None
        polled = 0
        if call.kind is Wait.READ:
            proof = self.refers(args[0])
        else:
            waits = self._wait_set(call.kind, args)
            proof = waits is not None and any(self.refers(fd) for fd in waits.reads)
            if proof and self._ends_soon(call, args):
                proof = False
                if self._polling and tid == self.main:
                    polled = max(self._timeout_ns(call, args) or 0, 0)
            if proof or polled:
                assert waits is not None
                if not self._channels.only_own(self._files, waits.wakes, self.refers):
                    proof = False
                    polled = 0
        if (proof or polled) and self.runs(tid) == before:
            if proof:
                return before
            self.polled = Polled(
                timeout_ns=polled,
                stamp=before,
                tids=(tid,),
                wakes=wakes_in(before),
                busy_ns=busy_ns_in(before),
            )
        return None

    def all_threads(self, tids: list[str]) -> Threads | None:
        """Judge a threaded process whole: every thread asleep, none with a wake-up coming.

        Returns None unless every thread in ``tids`` is asleep (state ``S``) with no
        signal queued for it or its process, in a wait that only the user or the
        process itself can end (see the module docstring), with none of its own
        descriptors readable, and no thread ran between the first stamp read and the
        last. Some thread must wait on the terminal: in a proof wait (``reading``), or
        in a wait that fails only by its short timeout (``polled_ns``).
        """
        stamps = [self.runs(tid) for tid in tids]
        if any(stamp is None for stamp in stamps):
            return None
        reading = False
        polled: int | None = None
        for tid in tids:
            kind = self._thread_wait(tid)
            if kind is None:
                return None
            if kind == 0:
                reading = True
            elif kind > 0:
                polled = kind if polled is None else min(polled, kind)
        after = [self.runs(tid) for tid in tids]
        if after != stamps or (not reading and polled is None):
            return None
        known = [stamp for stamp in stamps if stamp is not None]
        wakes = [wakes_in(stamp) for stamp in known]
        busy = [busy_ns_in(stamp) for stamp in known]
        return Threads(
            reading=reading,
            polled_ns=polled,
            wakes=None if None in wakes else sum(w for w in wakes if w is not None),
            busy_ns=None if None in busy else sum(b for b in busy if b is not None),
            stamps=tuple(known),
        )

    def stamp_of(self, tids: tuple[str, ...]) -> bytes | None:
        """The run stamps of ``tids`` joined, as :class:`Polled` keeps them."""
        stamps = [self.runs(tid) for tid in tids]
        if any(stamp is None for stamp in stamps):
            return None
        return b"".join(stamp for stamp in stamps if stamp is not None)

    def _syscall(self, tid: str) -> tuple[int, list[int]] | None:
        """The call thread ``tid`` is blocked in and its arguments, read from its
        ``syscall`` line; None when it runs, is not in a call, or is a 32-bit task."""
        line = self._task_file(tid, "syscall")
        if line is None:
            return None
        parsed = parts.parse_syscall(line.decode("ascii", "replace"))
        if parsed is None:
            return None
        number, args, stack = parsed
        # A stack above 4 GiB is a 64-bit process's (a compat task's registers are 32
        # bits wide), which spares the executable check in nearly every look.
        if stack <= 0xFFFFFFFF and not self._is_64bit(self._files.pid):
            return None
        return number, args

    def _thread_wait(self, tid: str) -> int | None:
        """How thread ``tid`` waits: 0 in a proof wait on the terminal, the timeout (ns,
        positive) of a wait on the terminal that fails only by its short timeout, -1
        asleep elsewhere with nothing coming; None when it is not provably asleep so."""
        status = read_bytes(f"{self._proc}/{self._files.pid}/task/{tid}/status")
        if status is None or not parts.asleep_unsignalled(status):
            return None
        found = self._syscall(tid)
        if found is None:
            return None
        number, args = found
        if number == self._table.futex:
            return -1 if self._futex_waits_long(args) else None
        signal_wait = self._table.signal_waits.get(number)
        if signal_wait is not None:
            # No signal is queued (checked above): it sleeps until one is sent.
            if signal_wait < 0 or args[signal_wait] == 0:
                return -1
            left = self._timespec_ns(args[signal_wait])
            return -1 if left is not None and left > SHORT_WAIT_NS else None
        call = self._table.waits.get(number)
        if call is None:
            return None
        if call.kind is Wait.READ:
            waits: WaitSet | None = WaitSet(reads=[args[0]], wakes=[args[0]])
        else:
            waits = self._wait_set(call.kind, args)
        if waits is None:
            return None
        terminal = any(self.refers(fd) for fd in waits.reads)
        timeout = self._timeout_ns(call, args)
        short = timeout is not None and timeout <= SHORT_WAIT_NS
        if short and (not terminal or timeout is None or timeout <= 0):
            return None
        if not self._channels.only_own(self._files, waits.wakes, self.refers):
            return None
        if has_pending_wakeup(
            self._files, waits.wakes, self.refers, self._channels.peers, SHORT_WAIT_NS
        ):
            return None
        if not terminal:
            return -1
        return timeout if short and timeout is not None else 0

    def _futex_waits_long(self, args: list[int]) -> bool:
        """A ``futex`` sleep with no timeout, or one further away than :data:`SHORT_WAIT_NS`."""
        op = args[1] & 0xFFFFFFFF
        command = op & _FUTEX_CMD_MASK
        address = args[3]
        if command in _FUTEX_RELATIVE:
            absolute = False
        elif command in _FUTEX_ABSOLUTE or command == _FUTEX_LOCK_PI:
            absolute = True
        else:
            return False  # a wake, a requeue, an unknown operation: not a plain sleep
        if address == 0:
            return True
        left = self._timespec_ns(address)
        if left is None:
            return False
        if absolute:
            realtime = command == _FUTEX_LOCK_PI or op & _FUTEX_CLOCK_REALTIME
            clock = time.CLOCK_REALTIME if realtime else time.CLOCK_MONOTONIC
            left -= time.clock_gettime_ns(clock)
        return left > SHORT_WAIT_NS

    def _timespec_ns(self, address: int) -> int | None:
        """The ``struct timespec`` at ``address`` in nanoseconds; None when unreadable."""
        raw = self._files.memory(address, _TIME.size)
        if raw is None:
            return None
        seconds, nanos = _TIME.unpack(raw)
        total: int = seconds * 1_000_000_000 + nanos
        return total

    def runs(self, tid: str) -> bytes | None:
        """Something that changes whenever the thread runs: its scheduler statistics
        (run time, wait time, time slices), or its context-switch counts without them."""
        runs = self._task_file(tid, "schedstat")
        if runs is not None:
            return runs
        status = read_bytes(f"{self._proc}/{self._files.pid}/task/{tid}/status")
        if status is None:
            return None
        start = status.find(b"voluntary_ctxt_switches:")
        return status[start:] if start >= 0 else None

    def _task_file(self, tid: str, name: str) -> bytes | None:
        kept = self._files.kept
        if kept is not None and tid == self.main:
            return kept.read(name)
        return read_bytes(f"{self._proc}/{self._files.pid}/task/{tid}/{name}")

    def refers(self, fd: int) -> bool:
        """True if ``fd`` of this process is the session's terminal."""
        known = self._refers.get(fd)
        if known is None:
            known = self._refers[fd] = self._refers_now(fd)
        return known

    def _refers_now(self, fd: int) -> bool:
        if fd < 0 or fd > 0x7FFFFFFF:
            return False
        st = self._files.stat(fd)
        if st is None:
            return False
        if (st.st_dev, st.st_ino) == (self._terminal.device, self._terminal.inode):
            return True
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == _DEV_TTY:
            ctty = read_stat(self._files.pid, self._proc)
            return ctty is not None and ctty.tty_nr != 0 and ctty.tty_nr == self._terminal.rdev
        return False

    def _ends_soon(self, call: WaitCall, args: list[int]) -> bool:
        """True if the wait gives up by itself within :data:`SHORT_WAIT_NS`, or its
        timeout cannot be read."""
        limit = self._timeout_ns(call, args)
        return limit is not None and limit <= SHORT_WAIT_NS

    def _timeout_ns(self, call: WaitCall, args: list[int]) -> int | None:
        """The wait's timeout in nanoseconds: None without one, -1 when it cannot be read."""
        if call.limit is Limit.NONE:
            return None
        value = args[call.limit_arg]
        if call.limit is Limit.MILLIS:
            millis = value & 0xFFFFFFFF
            if millis >= 1 << 31:
                return None  # negative: no timeout
            return millis * 1_000_000
        if value == 0:
            return None  # NULL: no timeout
        raw = self._files.memory(value, _TIME.size)
        if raw is None:
            return -1
        seconds, fraction = _TIME.unpack(raw)
        if seconds < 0 or fraction < 0:
            return -1  # the kernel refuses such a wait: nothing to judge
        scale = 1000 if call.limit is Limit.TIMEVAL else 1
        total: int = seconds * 1_000_000_000 + fraction * scale
        return total

    def _wait_set(self, kind: Wait, args: list[int]) -> WaitSet | None:
        if kind is Wait.SELECT:
            return self._select_set(args[0], args[1], args[2], args[3])
        if kind is Wait.POLL:
            return self._poll_set(args[0], args[1])
        return self._epoll_set(args[0])

    def _select_set(self, nfds: int, readfds: int, writefds: int, exceptfds: int) -> WaitSet | None:
        if readfds == 0 or nfds <= 0:
            return None
        nfds = min(nfds, _MAX_SELECT_FDS)
        reads = self._fd_set(readfds, nfds)
        if reads is None:
            return None
        wakes = list(reads)
        for address in (writefds, exceptfds):
            if address:
                more = self._fd_set(address, nfds)
                if more is None:
                    return None
                wakes.extend(more)
        return WaitSet(reads=reads, wakes=wakes)

    def _fd_set(self, address: int, nfds: int) -> list[int] | None:
        bitmap = self._files.memory(address, (nfds + 7) // 8)
        if bitmap is None:
            return None
        return parts.set_bits(bitmap, nfds)

    def _poll_set(self, address: int, nfds: int) -> WaitSet | None:
        if address == 0 or nfds <= 0 or nfds > _MAX_POLLFDS:
            return None
        raw = self._files.memory(address, nfds * _POLLFD.size)
        if raw is None:
            return None
        reads: list[int] = []
        wakes: list[int] = []
        for fd, events, _revents in _POLLFD.iter_unpack(raw):
            if fd < 0:
                continue  # ignored by poll
            wakes.append(fd)  # even with no events asked for, hang-up and errors wake it
            if events & _POLL_READ:
                reads.append(fd)
        return WaitSet(reads=reads, wakes=wakes)

    def _epoll_set(self, epfd: int) -> WaitSet | None:
        info = self._files.info(epfd)
        entries = epoll_entries(info) if info is not None else None
        if entries is None:
            return None
        reads: list[int] = []
        wakes: list[int] = []
        for entry in entries:
            if not entry.armed:
                continue
            st = self._files.stat(entry.fd)
            if st is None or st.st_ino != entry.inode:
                return None  # the number now names another file: the watched one is unseen
            wakes.append(entry.fd)
            if entry.events & _EPOLL_READ:
                reads.append(entry.fd)
        return WaitSet(reads=reads, wakes=wakes)
