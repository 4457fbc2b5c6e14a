"""The local terminal-process provider: one child on one PTY, owned end to end.

The provider is mechanism only — PTY allocation, byte transport, foreground inspection
and signalling, and full-tree teardown. It knows nothing about prompts; backends build
readiness on top of :meth:`LocalTerminalProcess.inspect_foreground` and
:meth:`LocalTerminalProcess.is_reading_terminal`.

Platforms: Linux has everything. macOS has everything except the exact stdin-wait probe
(``input_waiting`` is always False) and watches exit with a thread instead of a pidfd.
Windows is refused at spawn with :class:`UnsupportedPlatform`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import resource
import signal
import struct
import sys
from collections.abc import Callable

import attrs

from ..kernel.errors import TerminalError, UnsupportedPlatform
from ..kernel.signals import FOREGROUND_SIGNALS
from ..kernel.subscribe import subscribe
from . import hostexit, hostguard, hostlimits
from .env import child_environment
from .inspector import (
    PollingWait,
    ReaderWait,
    ShellHelpers,
    StdinProbe,
    TerminalIdentity,
    default_stdin_probe,
)
from .peer import TerminalInput
from .process_table import ProcessIdentity, ProcessTable, default_process_table
from .procfiles import KeptFiles
from .procfs import read_stat
from .scans import ScanShare
from .strays import TAG_VARIABLE, new_tag, sweep_orphans
from .taskfacts import (
    executable_id,
    quietly_asleep,
    ran_since,
    run_stamp,
    sole_member,
    wake_count,
)
from .teardown import TreeReaper
from .types import (
    ExitStatus,
    Foreground,
    OutputHandler,
    ProcessWrapper,
    TerminalProcess,
    TerminalSpawnSpec,
)

if sys.platform != "win32":
    import fcntl
    import termios

    from .exitwatch import ExitWatch
    from .ptyio import PtyChannel
    from .ptyspawn import SpawnedPty, Spawner, loop_turn, prestart_server, spawn_pty

__all__ = ["FOREGROUND_SIGNALS", "LocalTerminalProcess", "LocalTerminalProvider"]

_REFUSE_SHELL_KILL = "refusing to SIGKILL the terminal shell; close the session instead"
_LINUX = sys.platform.startswith("linux")
_TERMIOS_BUFFER = bytes(64)  # room for the kernel's struct termios (36 bytes)
_LFLAG = struct.Struct("I")
_LFLAG_OFFSET = 12  # after c_iflag, c_oflag and c_cflag


class LocalTerminalProvider:
    """Spawns processes on local PTYs (``ctx.subprocess``).

    ``process_table`` and ``stdin_probe`` are injectable for tests; the defaults are the
    platform's real table (``/proc`` on Linux, psutil elsewhere) and its probe.

    ``spawner`` says who forks: ``"fork-server"`` (default; Linux, falls back to
    in-process where the server cannot run) keeps every fork off this process so opening
    a terminal never stalls the event loop; ``"in-process"`` forks here. The fork server
    starts (off the loop) at the first spawn; :meth:`prestart` starts it earlier.

    Making a provider raises this process's soft open-file limit to the hard one (once
    per process, see :mod:`.hostlimits`); its shells still start with the limit given.
    """

    def __init__(
        self,
        process_table: ProcessTable | None = None,
        stdin_probe: StdinProbe | None = None,
        spawner: Spawner = "fork-server",
    ) -> None:
        if spawner not in ("fork-server", "in-process"):
            raise TerminalError(
                f"spawner must be 'fork-server' or 'in-process', got {spawner!r}",
                "INVALID_ARGUMENT",
            )
        hostlimits.raise_open_file_limit()
        self._table: ProcessTable = process_table or default_process_table()
        # Every teardown of this provider's terminals shares the full scans of the table.
        self._scans = ScanShare(self._table)
        self._opening = 0  # opens between their descriptor check and their end
        self._probe: StdinProbe | None = stdin_probe
        self._spawner: Spawner = spawner
        self._wrappers: list[ProcessWrapper] = []

    def add_process_wrapper(self, wrap: ProcessWrapper) -> Callable[[], None]:
        """Hand every process spawned from now on through ``wrap`` before returning it.

        Wrappers apply in the order they were added; the caller of :meth:`spawn_terminal`
        gets what the last returned. A wrapper must not raise (a recorder that cannot
        record returns the process unchanged). Returns a function that removes it.
        """
        return subscribe(self._wrappers, wrap)

    def prestart(self) -> None:
        """Start the fork server in the background now, so the first open need not wait
        for it; returns at once. A no-op for ``spawner="in-process"`` and off Linux."""
        if self._spawner == "fork-server" and sys.platform != "win32":
            prestart_server()

    async def spawn_terminal(self, spec: TerminalSpawnSpec) -> TerminalProcess:
        """Start ``spec.argv`` on a new PTY as the leader of a new session.

        The child gets :func:`child_environment` of ``spec.env`` and a ``rows x cols``
        window. Output starts flowing (into a buffer) immediately. The process is a
        :class:`LocalTerminalProcess`, handed through the wrappers of
        :meth:`add_process_wrapper` when there are any.

        Raises:
            UnsupportedPlatform: on Windows.
            TerminalError: ``SPAWN_FAILED`` when the executable is missing, ``cwd`` is
                unusable or exec fails; ``HOST_LIMIT`` when a limit of the machine is in
                the way — descriptors (also while fewer than
                :data:`.hostlimits.DESCRIPTOR_HEADROOM` are left), processes,
                pseudo-terminals — naming it and how to raise it. Nothing is left
                running or open.
        """
        if sys.platform == "win32":
            raise UnsupportedPlatform(
                "local terminals need a POSIX PTY; Windows (ConPTY) is not supported"
            )
        loop = asyncio.get_running_loop()
        if self._probe is None:
            self._probe = default_stdin_probe()
        probe = self._probe
        # The tag names everything this terminal starts, for the teardown without cgroups.
        spec = attrs.evolve(spec, env={**spec.env, TAG_VARIABLE: new_tag()})
        async with loop_turn():
            hostlimits.check_descriptor_headroom(spec.argv[0], self._opening + 1)
            env = child_environment(spec.env)
        self._opening += 1
        try:
            spawned = await spawn_pty(
                spec.argv,
                cwd=spec.cwd,
                env=env,
                rows=spec.rows,
                cols=spec.cols,
                spawner=self._spawner,
                cgroups=spec.cgroup.procs_files if spec.cgroup is not None else (),
            )
            return await self._handle(loop, spawned, spec, probe)
        except BaseException:
            if spec.cgroup is not None:
                await spec.cgroup.discard()
            raise
        finally:
            self._opening -= 1

    async def _handle(
        self,
        loop: asyncio.AbstractEventLoop,
        spawned: SpawnedPty,
        spec: TerminalSpawnSpec,
        probe: StdinProbe,
    ) -> TerminalProcess:
        """Build and start the handle of a spawned child; on failure leave nothing."""
        process: LocalTerminalProcess | None = None
        started = False
        try:
            # Opens that arrive together are built one step per turn: first the handle
            # with what it must know about the child (procfs and terminal looks), then
            # its readers start. The caller's step after the return then continues the
            # last turn, so it sets up its output handler before any output is read.
            async with loop_turn():
                facts = _ChildFacts.read(spawned, self._table, probe, spec.argv[0])
                process = LocalTerminalProcess(
                    loop, spawned, spec, self._table, probe, facts, scans=self._scans
                )
            async with loop_turn():
                started = True
                process._start()  # cleans up after itself if it fails
        except BaseException as exc:
            if process is None:
                _abandon(spawned, close_fds=True)
            elif not started:
                process._discard()
            limit = (
                hostlimits.open_file_limit_error(exc.errno or 0, spec.argv[0])
                if isinstance(exc, OSError)
                else None
            )
            if limit is not None:
                raise limit from exc
            raise
        wrapped: TerminalProcess = process
        for wrap in self._wrappers:
            wrapped = wrap(wrapped, spec)
        return wrapped


@attrs.frozen(kw_only=True)
class _ChildFacts:
    """What a handle must know about its new child, read once when it is built."""

    identity: ProcessIdentity
    session: int  # -1: no session of its own to adopt
    terminal: TerminalIdentity | None

    @classmethod
    def read(
        cls, spawned: SpawnedPty, table: ProcessTable, probe: StdinProbe, name: str
    ) -> _ChildFacts:
        row = table.lookup(spawned.pid)
        if row is None:
            # Unreaped, so it is there: a read that failed for want of a descriptor.
            shortage = hostlimits.descriptor_shortage(name)
            if shortage is not None:
                raise shortage
            raise TerminalError(
                f"cannot spawn {name!r}: the child vanished at start", "SPAWN_FAILED"
            )
        return cls(
            identity=ProcessIdentity(spawned.pid, row.create_time),
            session=_session_of(spawned.pid),
            terminal=probe.terminal_of(spawned.master_fd),
        )


class LocalTerminalProcess:
    """A live child on a PTY. Create it with :meth:`LocalTerminalProvider.spawn_terminal`.

    Output is delivered event-driven to the handler from :meth:`set_output_handler`.
    :attr:`done` resolves with the :class:`ExitStatus` once the child has exited, been
    reaped, and the output still readable at that moment has been delivered. The master
    descriptor stays open (and output keeps flowing, e.g. from a background job holding
    the slave) until :meth:`terminate` succeeds.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        spawned: SpawnedPty,
        spec: TerminalSpawnSpec,
        table: ProcessTable,
        probe: StdinProbe,
        facts: _ChildFacts,
        *,
        scans: ScanShare | None = None,
    ) -> None:
        self._loop = loop
        self._spawned = spawned
        self._pid = spawned.pid
        self._spec = spec
        self._probe = probe
        self._done: asyncio.Future[ExitStatus] = loop.create_future()
        self._shell_pgid: int | None = None
        self._helpers: ShellHelpers | None = None  # the shell's declared helper waits
        # Reported when no group of its own holds the foreground; asked once (it never changes).
        self._own_pgrp = os.getpgrp()
        # The shell's /proc files, open across looks: it is looked at on every send.
        self._kept: KeptFiles | None = None
        self._teardown: asyncio.Task[None] | None = None
        self._closed = False
        self._reaped = False
        self._exit_task: asyncio.Task[None] | None = None
        self._identity = facts.identity
        self._session = facts.session
        self._reaper = TreeReaper(table, self._identity, self._session, scans)
        self._terminal: TerminalIdentity | None = facts.terminal
        self._channel = PtyChannel(loop, spawned.master_fd)
        # The slave's input queue, asked on every send through a peer kept open while
        # the child runs (released with the kept /proc files).
        self._input = TerminalInput(spawned.master_fd, keep=_may_keep_files())
        self._watch = ExitWatch(loop, spawned.pid, self._on_child_exit, pidfd=spawned.pidfd)

    def _start(self) -> None:
        """Begin reading output and watching for exit; on failure leave nothing behind."""
        try:
            self._channel.start()
            self._watch.start()
        except BaseException:
            self._discard()
            raise
        hostexit.register(self)
        hostguard.guard_session(self._session)

    def _discard(self) -> None:
        """Undo a handle that never started, or failed to: kill and reap the child, close
        its descriptors (the channel and the watch own them) once it is killed, so the
        pidfd that kills it is still open."""
        _abandon(self._spawned, close_fds=False)
        self._watch.close()
        self._input.release()
        self._channel.close()

    # -- identity and output ------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The PTY child's pid (under a sandbox wrapper, the wrapper's)."""
        return self._pid

    @property
    def done(self) -> asyncio.Future[ExitStatus]:
        """Resolves with the exit status after the child is reaped and its output drained."""
        return self._done

    @property
    def exact_input_probe(self) -> bool:
        """True where ``input_waiting`` and :meth:`is_reading_terminal` are exact (Linux on
        x86_64/aarch64); False where they always answer False."""
        return self._terminal is not None

    @property
    def terminal_path(self) -> str | None:
        """The slave's path (``/dev/pts/N``) where known; informational."""
        return self._terminal.path if self._terminal is not None else None

    def set_output_handler(self, handler: OutputHandler | None) -> None:
        """Deliver output chunks to ``handler``; chunks buffered so far go first, at once.

        ``handler`` runs on the event loop and must not block; an exception it raises is
        reported to the loop's exception handler and output keeps flowing.
        """
        self._channel.set_handler(handler)

    def pending_output(self) -> int:
        """Bytes readable on the master (or buffered) that the handler has not received.

        Lets a caller tell "the program is quiet" from "its output is queued and about to
        be delivered" before trusting a readiness observation.
        """
        return self._channel.pending()

    def drain_output(self) -> None:
        """Deliver to the handler, now and synchronously, whatever output the master holds.

        Includes output still in flight inside the PTY layer. A caller about to write
        uses it to fence: everything delivered before the write was produced before it.
        """
        if self._channel.fd is not None:
            self._channel.drain()

    def unread_input(self) -> int | None:
        """Input bytes written to the terminal that no program has read yet.

        Counts bytes still in flight inside the PTY layer too. None when unknown (not
        Linux, a kernel without ``TIOCGPTPEER``, a closed or hung-up terminal).
        """
        return self._input.unread() if self._channel.fd is not None else None

    def flush_input(self) -> bool:
        """Discard input no program has read yet, as the terminal's Ctrl-C would.

        Returns False when it could not be done (not Linux, closed terminal).
        """
        return self._input.flush() if self._channel.fd is not None else False

    def wake_count(self, pid: int) -> int | None:
        """``pid``'s wake count (moves whenever it runs): a count that moved means it woke.

        None when unknown (the process is gone, not Linux).
        """
        return wake_count(pid, self._kept)

    def quietly_asleep(self, pid: int) -> bool | None:
        """True if ``pid`` sleeps with no signal pending (about to stay in its wait).

        None when unknown (the process is gone, not Linux).
        """
        return quietly_asleep(pid)

    def run_stamp(self, pid: int) -> bytes | None:
        """A stamp that changes whenever single-threaded ``pid`` runs; None when unknown.

        None also for a process with more than one thread, or where no probe exists.
        """
        if self._terminal is None:
            return None
        return run_stamp(pid, self._kept)

    def ran_since(self, pid: int, stamp: bytes) -> bool:
        """Whether ``pid`` ran since :meth:`run_stamp` returned ``stamp`` for it.

        True whenever that is not proven otherwise (no probe, the process gone).
        """
        if self._terminal is None:
            return True
        return ran_since(pid, stamp, self._kept)

    def executable_id(self, pid: int) -> tuple[int, int] | None:
        """The (device, inode) of ``pid``'s executable, or None when unknown."""
        return executable_id(pid)

    def has_children(self, pid: int) -> bool | None:
        """Whether the shell ``pid`` (see :meth:`set_shell_process_group`) has a child
        process now, from its kept ``children`` file; None for another pid or when the
        file cannot be read (the caller then asks :mod:`.listening`)."""
        kept = self._kept
        if kept is None or kept.pid != pid:
            return None
        return kept.has_content("children")

    def sole_member(self, pgid: int) -> bool:
        """True only if group ``pgid`` provably holds its leader alone (Linux).

        Once that leader is seen blocked reading, no other member can still be producing
        output for the terminal. False where no exact probe exists or anything is unknown.
        """
        if self._terminal is None:
            return False
        return sole_member(pgid)

    async def write(self, data: str | bytes) -> None:
        """Write ``data`` (str is UTF-8 encoded) in full, with backpressure.

        Concurrent writes are serialised, never interleaved. If the calling task is
        cancelled the unwritten remainder is dropped and ``CancelledError`` propagates.

        Raises:
            TerminalError: ``TERMINAL_CLOSED`` once the terminal is closed or hung up.
        """
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        await self._channel.write(payload)

    def write_now(self, data: bytes) -> int:
        """Write what the terminal takes of ``data`` at once, without waiting; the count.

        Spares a loop turn when the input fits, which it nearly always does. 0 while
        another write is in progress. A caller that gets less than all of ``data`` must
        write the rest with :meth:`write` before any other write.

        Raises:
            TerminalError: ``TERMINAL_CLOSED`` once the terminal is closed or hung up.
        """
        return self._channel.write_now(data)

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's window size.

        Raises:
            TerminalError: ``INVALID_ARGUMENT`` for sizes outside 1..65535,
                ``TERMINAL_CLOSED`` after teardown.
        """
        for name, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or not 0 < value <= 0xFFFF:
                raise TerminalError(
                    f"{name} must be an integer in 1..65535, got {value!r}", "INVALID_ARGUMENT"
                )
        self._channel.resize(rows, cols)

    # -- foreground ---------------------------------------------------------------------

    def foreground_pgid(self) -> int | None:
        """Return the terminal's foreground process group now, or None if unknown.

        Asks the master (``tcgetpgrp``); falls back to the PTY child's ``tpgid`` in
        ``/proc``. None after exit or teardown, never a guess.
        """
        fd = self._channel.fd
        if fd is None:
            return None
        try:
            pgid = os.tcgetpgrp(fd)
        except OSError:
            if self._done.done():
                return None
            stat = read_stat(self._pid)
            if stat is None:
                return None
            pgid = stat.tpgid
        return pgid if pgid > 0 and pgid != self._own_pgrp else None

    def terminal_modes(self) -> tuple[bool, bool] | None:
        """The terminal's (ECHO, ICANON) flags now; None when they cannot be read."""
        fd = self._channel.fd
        lflag = _local_modes(fd) if fd is not None else None
        if lflag is None:
            return None
        return bool(lflag & termios.ECHO), bool(lflag & termios.ICANON)

    def inspect_foreground(self) -> Foreground | None:
        """Describe the foreground group: its id, whether it is reading, and the modes.

        ``input_waiting`` is exact on Linux (some member is blocked reading this terminal,
        on fd 0 or on a ``/dev/tty`` descriptor) and always False elsewhere; ``wake_count``
        then lets a caller tell "still the same wait" from "woke and waits again".
        ``echo``/``canonical`` are the terminal's ECHO/ICANON flags. ``polling`` describes a
        group that is its leader alone, polling the terminal with a short timeout (see
        :class:`.inspector.PollingWait`). Returns None when the group or the terminal
        settings cannot be read.
        """
        pgid = self.foreground_pgid()
        fd = self._channel.fd
        if pgid is None or fd is None:
            return None
        lflag = _local_modes(fd)
        if lflag is None:
            return None
        terminal = self._terminal
        found = self._probe.group_wait(pgid, terminal, self._helpers) if terminal else None
        reader = found if isinstance(found, ReaderWait) else None
        return Foreground(
            process_group_id=pgid,
            input_waiting=reader is not None,
            echo=bool(lflag & termios.ECHO),
            canonical=bool(lflag & termios.ICANON),
            wake_count=(reader.wakes or 0) if reader is not None else 0,
            leader_stamp=reader.stamp if reader is not None else None,
            polling=found if isinstance(found, PollingWait) else None,
        )

    def is_reading_terminal(self, pid: int) -> bool:
        """Return True only if some thread of ``pid`` is blocked reading this terminal.

        The bash backend asks this about the shell itself to tell a real prompt from a
        forged one. Always False where no exact probe exists.
        """
        if self._terminal is None or self._channel.fd is None:
            return False
        return self._probe.process_reading(pid, self._terminal)

    def reader_wait(self, pid: int) -> ReaderWait | None:
        """``pid``'s wait, with its wake count and run stamp, if it is blocked reading this
        terminal; None otherwise and wherever no exact probe exists."""
        if self._terminal is None or self._channel.fd is None:
            return None
        return self._probe.reader_wait(pid, self._terminal, self._kept, self._helpers)

    def set_shell_process_group(self, pgid: int) -> None:
        """Record the shell's own process group (learned from its first prompt).

        Under a sandbox wrapper the PTY child is the wrapper, so the shell's group cannot
        be assumed from :attr:`pid`; until this is called, the child's group stands in.
        """
        if not isinstance(pgid, int) or pgid <= 0:
            raise TerminalError(
                f"process group must be a positive integer, got {pgid!r}", "INVALID_ARGUMENT"
            )
        self._shell_pgid = pgid
        quiet = self._spec.quiet_helpers
        if quiet is not None:  # by executable: a nested instance alike, other programs not
            exe = executable_id(pgid)
            self._helpers = ShellHelpers(executable=exe, waits=quiet) if exe else None
        if self._terminal is not None and _may_keep_files():
            if self._kept is not None:
                self._kept.close()
            self._kept = KeptFiles(pgid)

    def signal_foreground(self, sig: str, expected_pgid: int | None = None) -> int:
        """Send ``sig`` to the current foreground group and return that group's id.

        The group is resolved at call time. SIGKILL to the shell's own group is refused:
        killing the shell ends the session, which is :meth:`terminate`'s job. With
        ``expected_pgid`` the signal goes only to that group, and only while it still
        owns the foreground (a caller that looked first never hits a group that took
        the foreground after its look).

        Raises:
            TerminalError: ``INVALID_ARGUMENT`` for a signal outside SIGINT, SIGTERM,
                SIGKILL, SIGTSTP, SIGHUP or for SIGKILL to the shell; ``NO_FOREGROUND``
                when the foreground group cannot be determined or has vanished.
        """
        signum = FOREGROUND_SIGNALS.get(sig) if isinstance(sig, str) else None
        if signum is None:
            allowed = ", ".join(FOREGROUND_SIGNALS)
            raise TerminalError(
                f"unsupported signal {sig!r}; allowed: {allowed}", "INVALID_ARGUMENT"
            )
        pgid = self.foreground_pgid() if not self._done.done() else None
        if pgid is None:
            raise TerminalError(
                "cannot determine the terminal's foreground process group", "NO_FOREGROUND"
            )
        if expected_pgid is not None and pgid != expected_pgid:
            raise TerminalError(
                f"process group {expected_pgid} no longer owns the foreground", "NO_FOREGROUND"
            )
        shell_pgid = self._shell_pgid if self._shell_pgid is not None else self._pid
        if signum == signal.SIGKILL and pgid == shell_pgid:
            raise TerminalError(_REFUSE_SHELL_KILL, "INVALID_ARGUMENT")
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError as exc:
            raise TerminalError(
                f"foreground process group {pgid} vanished before {sig}", "NO_FOREGROUND"
            ) from exc
        except PermissionError as exc:
            raise TerminalError(
                f"not permitted to send {sig} to process group {pgid}", "NO_FOREGROUND"
            ) from exc
        return pgid

    # -- lifecycle ----------------------------------------------------------------------

    async def terminate(self) -> None:
        """Tear down the whole tree: captured processes, then the shell; close the PTY.

        Idempotent and shared: concurrent calls await one run; after success later calls
        return at once; after a failure a later call retries. Cancelling the caller does
        not stop a run in progress.

        Raises:
            TerminalError: ``TEARDOWN_FAILED`` naming the processes that survived SIGKILL.
        """
        if self._closed:
            return
        task = self._teardown
        if task is None:
            task = self._loop.create_task(self._run_teardown())
            task.add_done_callback(self._teardown_finished)
            self._teardown = task
        await asyncio.shield(task)

    def kill_sync(self) -> None:
        """SIGKILL the captured tree and the PTY child now, without waiting (host exit)."""
        with contextlib.suppress(Exception):
            self._reaper.kill_sync()
        if self._spec.cgroup is not None:
            with contextlib.suppress(Exception):
                self._spec.cgroup.kill_once()
        self.signal_shell(signal.SIGKILL)

    # ShellControl, used by TreeReaper.teardown

    @property
    def exited(self) -> bool:
        """True once the PTY child has been reaped."""
        return self._done.done()

    def signal_shell(self, signum: int) -> None:
        """Signal the PTY child itself; a no-op once it has been reaped."""
        if self._reaped:
            return
        with contextlib.suppress(ProcessLookupError):
            pidfd = self._watch.pidfd
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signum)
            else:
                # Unreaped, so the pid cannot have been reused.
                os.kill(self._pid, signum)

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for :attr:`done`; return whether it resolved."""
        if not self._done.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._done), timeout)
        return self._done.done()

    # -- internals ----------------------------------------------------------------------

    async def _run_teardown(self) -> None:
        grace, group = self._spec.grace_ms / 1000, self._spec.cgroup
        try:
            try:
                await self._reaper.teardown(self, grace)
            except TerminalError:
                if group is None:
                    raise
                # A tree that outran its reaper (a fork bomb) is all in the cgroup: empty
                # it, and the failure stands only if something of the tree survived that.
                await group.clear(grace)
                await self.wait_exit(grace)
                if self._reaper.live() or not self.exited:
                    raise
            else:
                # What the tree cannot see (setsid daemons, double forks) is in the cgroup,
                # or without one, orphaned to the fork server and tagged.
                if group is not None:
                    await group.clear(grace, removal=False)
                else:
                    await sweep_orphans(self._spec.env[TAG_VARIABLE], grace)
        finally:
            if self._done.done():
                self._channel.close()
                self._watch.close()
                self._forget_kept()
        self._closed = True
        hostexit.unregister(self)
        hostguard.forget_session(self._session)

    def _forget_kept(self) -> None:
        self._input.release()
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()

    def _teardown_finished(self, task: asyncio.Task[None]) -> None:
        # A failed run is forgotten so the next terminate() retries; reading the
        # exception here also keeps an unawaited failure from being logged as lost.
        if task.cancelled() or task.exception() is not None:
            self._teardown = None

    def _on_child_exit(self) -> None:
        if self._exit_task is None:
            self._exit_task = self._loop.create_task(self._finish_exit())

    async def _finish_exit(self) -> None:
        # The unreaped zombie still pins the pid, so the session can be captured safely.
        with contextlib.suppress(Exception):
            await self._reaper.capture_async()
        status = await self._reap()
        self._reaper.close_fence()
        self._watch.close()
        self._forget_kept()
        self._channel.drain()
        if not self._done.done():
            self._done.set_result(status)

    async def _reap(self) -> ExitStatus:
        # The exited child is reaped here, or by the fork server that is its parent.
        raw = await self._spawned.child.reap()
        self._reaped = True
        if raw is None:
            return ExitStatus(exit_code=None, signal=None)
        code = os.waitstatus_to_exitcode(raw)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"SIG{-code}"
            return ExitStatus(exit_code=None, signal=name)
        return ExitStatus(exit_code=code, signal=None)


def _local_modes(fd: int) -> int | None:
    """The terminal's local modes (``c_lflag``: ECHO, ICANON ...); None when unreadable.

    Asked on every send. On Linux one ``TCGETS`` and the word at its fixed place (four
    32-bit flag words lead ``struct termios`` on every architecture) spare building the
    list of attributes and control characters ``tcgetattr`` returns.
    """
    if _LINUX:
        try:
            raw = fcntl.ioctl(fd, termios.TCGETS, _TERMIOS_BUFFER)
        except OSError:
            return None
        return int(_LFLAG.unpack_from(raw, _LFLAG_OFFSET)[0])
    try:
        return int(termios.tcgetattr(fd)[3])
    except (OSError, termios.error):
        return None


def _session_of(pid: int) -> int:
    """The child's session id, or -1 (no session adoption) if it is unknown or our own."""
    try:
        sid = os.getsid(pid)
    except OSError:
        return -1
    return -1 if sid == os.getsid(0) else sid


def _abandon(spawned: SpawnedPty, *, close_fds: bool) -> None:
    """Kill and reap a child whose handle could not be built; close its descriptors if
    nothing took them yet."""
    spawned.child.abandon()
    if close_fds:
        for fd in (spawned.master_fd, spawned.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


_KEEP_FILES_MIN_LIMIT = 4096


@functools.cache
def _may_keep_files() -> bool:
    """Keep three ``/proc`` files open per shell only where descriptors are plentiful.

    Under the common 1,024-descriptor soft limit, hundreds of sessions would exhaust it;
    there every look opens its files instead.
    """
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return False
    return soft == resource.RLIM_INFINITY or soft >= _KEEP_FILES_MIN_LIMIT
