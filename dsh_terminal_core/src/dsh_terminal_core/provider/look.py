"""One look at the threads of one process: what each waits on, and whether it is proof.

:class:`Look` reads a thread's blocked system call, the descriptors it waits on (the
``select`` bitmaps, the ``pollfd`` array, an ``epoll`` instance's ``fdinfo``) and its
timeout from ``/proc``, and judges the wait by the rules of :mod:`.inspector_linux` (whose
docstring states them). It is separate from the probe so that the probe (which decides
whom to look at) and the look (which decides what one process is doing) stay small; the
look at a whole set of processes joined by channels (:mod:`.partners`) uses it too.
"""

from __future__ import annotations

import os
import stat
import struct
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from . import lookparts as parts
from .channels import ChannelJudge
from .inspector import QuietHelpers, TerminalIdentity
from .lookparts import Polled, Threads, WaitSet
from .procfiles import ProcessFiles, epoll_entries
from .procfs import read_bytes, read_stat
from .syscalls import Limit, SyscallTable, Wait, WaitCall
from .taskfacts import busy_ns_in, wakes_in
from .wakeups import has_pending_wakeup

__all__ = ["SHORT_WAIT_NS", "Look", "LookContext", "PartnerChannels"]

SHORT_WAIT_NS = 1_000_000_000  # a wait that ends by itself this soon is not proof
_POLL_READ = 0x0001 | 0x0040  # POLLIN | POLLRDNORM
_EPOLL_READ = 0x0001 | 0x0040  # EPOLLIN | EPOLLRDNORM
_POLLFD = struct.Struct("<ihh")  # struct pollfd {int fd; short events; short revents;}
_TIME = struct.Struct("<qq")  # struct timespec / struct timeval on 64-bit Linux
_MAX_POLLFDS = 65536  # bounds one memory read; larger arrays are not inspected past it
_MAX_SELECT_FDS = 1 << 20
_DEV_TTY = os.makedev(5, 0)  # /dev/tty: "my controlling terminal"
# futex operations that put a thread to sleep, and how each states its timeout.
_FUTEX_CMD_MASK = ~(128 | 256)  # FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME
_FUTEX_CLOCK_REALTIME = 256
_FUTEX_RELATIVE = frozenset({0})  # FUTEX_WAIT
_FUTEX_ABSOLUTE = frozenset({9, 11, 13})  # WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2
_FUTEX_LOCK_PI = 6  # absolute, always CLOCK_REALTIME
_TIMER_ABSTIME = 1  # clock_nanosleep's flag for an absolute time
_FOREVER = 1 << 62  # a sleep without a timeout, in nanoseconds


class LookContext(Protocol):
    """What a look needs from the probe that makes it."""

    @property
    def table(self) -> SyscallTable: ...

    @property
    def channels(self) -> ChannelJudge: ...

    @property
    def proc(self) -> str: ...

    def is_64bit(self, pid: int) -> bool: ...


class PartnerChannels(Protocol):
    """Accepts the descriptors of a wait that are channels to other processes of a set
    being looked at together (:mod:`.partners`), checking that none holds news."""

    def accept(
        self, files: ProcessFiles, fds: Iterable[int], is_terminal: Callable[[int], bool]
    ) -> bool: ...


class Look:
    """One look at the threads of one process, sharing what was read about its files."""

    def __init__(
        self,
        probe: LookContext,
        files: ProcessFiles,
        terminal: TerminalIdentity,
        *,
        polling: bool,
        partners: PartnerChannels | None = None,
        helpers: QuietHelpers | None = None,
    ) -> None:
        self._table = probe.table
        self._is_64bit = probe.is_64bit
        self._channels = probe.channels
        self._proc = probe.proc
        # Asked in a look at a whole set of processes (:mod:`.partners`): channels to
        # other processes of the set are accepted there, their news checked there.
        self._partners = partners
        self._files = files
        self.main = str(files.pid)
        # Waits the program declares quiet for its threads but the main one (a shell's
        # policy: fish's idle pool workers); None for every other program.
        self._helpers = helpers
        self._terminal = terminal
        self._refers: dict[int, bool] = {}
        # Asked for polling waits: the main thread's is kept in ``polled`` when found.
        self._polling = polling
        self.polled: Polled | None = None
        # The longest short sleep of a thread elsewhere seen by :meth:`all_threads`.
        self._short_sleep = 0

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
                if not self._only_own(waits.wakes):
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

    def all_threads(self, tids: list[str], *, on_terminal: bool = True) -> Threads | None:
        """Judge a threaded process whole: every thread asleep, none with a wake-up coming.

        Returns None unless every thread in ``tids`` is asleep (state ``S``) with no
        signal queued for it or its process, in a wait that only the user or the
        process itself can end (see the module docstring), with none of its own
        descriptors readable, and no thread ran between the first stamp read and the
        last. Some thread must wait on the terminal: in a proof wait (``reading``), or
        in a wait that fails only by its short timeout (``polled_ns``) — unless
        ``on_terminal`` is False (a process of a set looked at together, :mod:`.partners`,
        where another may be the one reading).
        """
        stamps = [self.runs(tid) for tid in tids]
        if any(stamp is None for stamp in stamps):
            return None
        reading = False
        polled: int | None = None
        self._short_sleep = 0
        for tid in tids:
            kind = self._thread_wait(tid)
            if kind is None:
                return None
            if kind == 0:
                reading = True
            elif kind > 0:
                polled = kind if polled is None else min(polled, kind)
        if self._short_sleep and not on_terminal:
            return None  # in a set looked at together, a thread about to wake is not quiet
        if self._short_sleep and (reading or polled is not None):
            # A thread that wakes by itself soon (Go's runtime ticks every 100 ms) makes
            # the process a poller at best: proof of nothing at one look, judged over
            # several by the recurring-poll rule, each look after the longest such wait.
            reading = False
            polled = max(polled or 0, self._short_sleep)
        after = [self.runs(tid) for tid in tids]
        if after != stamps or (on_terminal and not reading and polled is None):
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
            left = self._futex_left_ns(args)
            if left is not None and left > SHORT_WAIT_NS:
                return -1
            helpers = self._helpers
            if left is not None and helpers is not None and tid != self.main:
                if helpers.futex_ns and left <= helpers.futex_ns:
                    return -1  # a declared helper's timed wait for work: it ends quietly
            return self._sleeps_short(self._futex_timeout(args))
        sleep = self._table.sleeps.get(number)
        if sleep is not None:
            return self._sleeps_short(self._sleep_ns(args, sleep))
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
            if terminal or not self._quiet_own_poll(tid, timeout):
                return None
        if not self._only_own(waits.wakes) and (
            self._partners is None
            or not self._partners.accept(self._files, waits.wakes, self.refers)
        ):
            return None
        if has_pending_wakeup(
            self._files, waits.wakes, self.refers, self._channels.peers, SHORT_WAIT_NS
        ):
            return None
        if not terminal:
            return -1
        return timeout if short and timeout is not None else 0

    def _only_own(self, fds: list[int]) -> bool:
        """Every descriptor in ``fds`` is the terminal or the process's own event source."""
        shared = self._helpers is not None and self._helpers.shared_fifos
        return self._channels.only_own(self._files, fds, self.refers, shared_fifos=shared)

    def _quiet_own_poll(self, tid: str, timeout_ns: int | None) -> bool:
        """A helper thread's short wait off the terminal that its program declares quiet.

        Only the kind of wait is judged here: the caller still requires every descriptor
        in it to be the process's own, none readable.
        """
        helpers = self._helpers
        return (
            helpers is not None
            and tid != self.main
            and timeout_ns is not None
            and 0 < timeout_ns <= helpers.own_poll_ns
        )

    def _sleeps_short(self, timeout_ns: int | None) -> int | None:
        """A thread asleep elsewhere until a short, known timeout: noted for
        :meth:`all_threads` (-1, asleep elsewhere), or None when the timeout is unknown."""
        if timeout_ns is None or not 0 < timeout_ns <= SHORT_WAIT_NS:
            return None
        self._short_sleep = max(self._short_sleep, timeout_ns)
        return -1

    def _futex_timeout(self, args: list[int]) -> int | None:
        """The relative timeout (ns) a plain ``FUTEX_WAIT`` asked for; None otherwise."""
        if (args[1] & 0xFFFFFFFF) & _FUTEX_CMD_MASK not in _FUTEX_RELATIVE or args[3] == 0:
            return None
        return self._timespec_ns(args[3])

    def _sleep_ns(self, args: list[int], index: int) -> int | None:
        """How long a ``nanosleep`` or relative ``clock_nanosleep`` asked to sleep, or how
        long an absolute ``clock_nanosleep`` (Python's ``time.sleep``) has left."""
        asked = self._timespec_ns(args[index])
        if asked is None or index != 2 or not args[1] & _TIMER_ABSTIME:
            return asked
        try:
            return asked - time.clock_gettime_ns(args[0] & 0xFFFFFFFF)
        except OSError:
            return None

    def _futex_left_ns(self, args: list[int]) -> int | None:
        """How long a ``futex`` sleep has left (ns; :data:`_FOREVER` without a timeout).

        None when the call is no plain sleep (a wake, a requeue, an unknown operation) or
        its timeout cannot be read. A relative timeout is the one asked for.
        """
        op = args[1] & 0xFFFFFFFF
        command = op & _FUTEX_CMD_MASK
        address = args[3]
        if command in _FUTEX_RELATIVE:
            absolute = False
        elif command in _FUTEX_ABSOLUTE or command == _FUTEX_LOCK_PI:
            absolute = True
        else:
            return None
        if address == 0:
            return _FOREVER
        left = self._timespec_ns(address)
        if left is None:
            return None
        if absolute:
            realtime = command == _FUTEX_LOCK_PI or op & _FUTEX_CLOCK_REALTIME
            clock = time.CLOCK_REALTIME if realtime else time.CLOCK_MONOTONIC
            left -= time.clock_gettime_ns(clock)
        return left

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
