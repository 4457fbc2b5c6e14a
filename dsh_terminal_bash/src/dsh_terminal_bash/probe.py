"""What the readiness ladder asks the session about its terminal, and its listening sockets.

:class:`SessionProbe` is the session's half of :class:`~.readiness.ReadinessProbe`: the
looks at the foreground group, its read wait and the terminal's queues that settle a send,
plus what the session's processes listen on. It is separate from ``session.py`` because
it only looks (at ``/proc`` and the terminal, through the process): it types nothing,
signals nothing and owns no send. :class:`~.session.BashSession` inherits it.

It needs from the session the attributes declared on the class below, all set in
``BashSession.__init__``: the terminal process, the shell's group and executable once
learned, whether the stdin-wait probe is exact, the status, the closing flag, the
scrollback (for the open line) and the active send. It keeps its own state in the session
too: the last wait seen (``_wait_seen``), the look a send's write fence reused
(``_stamped_before``), the shell's run stamp when it was last seen childless
(``_childless_stamp``) and the sockets listening before the latest write
(``_listening_before``, which ``_begin_write`` sets).
"""

from __future__ import annotations

import os

from dsh_terminal_core.provider import Foreground, TerminalProcess
from dsh_terminal_core.provider.listening import (
    Listener,
    has_children,
    listeners,
    session_processes,
)
from dsh_terminal_core.registry import SessionStatus

from .operation import BashSendOperation
from .scrollback import Scrollback

__all__ = ["NO_SOCKETS", "SessionProbe"]

NO_SOCKETS: frozenset[int] = frozenset()


class SessionProbe:
    """The looks the readiness ladder takes through the session (a mixin of BashSession)."""

    # What it reads of the session (set in ``BashSession.__init__`` and ``start``).
    _process: TerminalProcess
    _shell_pgid: int | None
    _shell_exe: tuple[int, int] | None
    _exact: bool
    _closing: bool
    _status: SessionStatus
    _scrollback: Scrollback
    _op: BashSendOperation | None
    # Its own state, kept on the session (see the comments in ``BashSession.__init__``).
    _wait_seen: Foreground | None
    _stamped_before: Foreground | None
    _childless_stamp: bytes | None
    _listening_before: frozenset[int]

    # -- the probe the readiness ladder asks ------------------------------------------

    @property
    def exact(self) -> bool:
        return self._exact

    def shell_at_prompt(self) -> bool:
        foreground = self._process.foreground_pgid()
        if foreground is None:
            return False
        if self._shell_pgid is not None and foreground != self._shell_pgid:
            return False
        # Before the first prompt the shell's group is unknown: its leader is the shell.
        return self._process.is_reading_terminal(foreground)

    def prompt_reader(self) -> tuple[int, int | None] | None:
        foreground = self._process.foreground_pgid()
        if foreground is None:
            return None
        # The session's own shell leads the foreground on nearly every send.
        pid = foreground if foreground == self._shell_pgid else self._prompt_shell(foreground)
        if pid is None:
            return None
        # The wake count comes with the look, read so that "reading" and the count
        # describe one and the same wait.
        wait = self._process.reader_wait(pid)
        if wait is None:
            return None
        if wait.stamp is not None and wait.wakes is not None:
            self._wait_seen = Foreground(
                process_group_id=pid,
                input_waiting=True,
                echo=True,  # not read: a look from before a write is compared by its wait
                wake_count=wait.wakes,
                leader_stamp=wait.stamp,
            )
        return pid, wait.wakes

    def _foreground_before_write(self) -> Foreground | None:
        """The foreground as the stdin-wait tier must remember it from before the write.

        When the last look that found a single-threaded leader reading (the shell at its
        prompt, a REPL between two sends) is provably still the same wait — the same
        group owns the foreground and its leader has not run since the run stamp read in
        that look — the snapshot follows from that look without another: the leader is
        still blocked in the read it was seen in, with the same wake count. Anything else
        takes a full look. The terminal's modes are not read again: the ladder compares a
        look from before the write by its wait alone (group, waiting, wake count).
        """
        seen, self._wait_seen = self._wait_seen, None
        self._stamped_before = None
        if seen is not None and seen.leader_stamp is not None:
            pgid = seen.process_group_id
            if self._process.foreground_pgid() == pgid and not self._process.ran_since(
                pgid, seen.leader_stamp
            ):
                self._stamped_before = seen
                return seen
        return self.foreground()

    def _prompt_shell(self, foreground: int) -> int | None:
        """The pid of the protocol shell leading ``foreground``, or None.

        That is the session's shell, or another instance of the same shell program
        started inside it (``bash``, ``su``, ``sudo -i``, ``exec bash``), which inherited
        the protocol through the environment and leads its own foreground group while
        it reads a line.
        """
        if self._shell_pgid is None or foreground == self._shell_pgid:
            # Before the first prompt the shell's group is unknown: its leader is the shell.
            return foreground
        if (
            self._shell_exe is not None
            and self._process.executable_id(foreground) == self._shell_exe
        ):
            return foreground
        return None

    def is_protocol_shell(self, pgid: int) -> bool:
        return self._prompt_shell(pgid) is not None

    def wake_count(self, pid: int) -> int | None:
        return self._process.wake_count(pid)

    def wake_candidates(self) -> tuple[int, ...]:
        pids = [self._shell_pgid] if self._shell_pgid is not None else []
        foreground = self._process.foreground_pgid()
        if foreground is not None and foreground not in pids:
            pids.append(foreground)
        return tuple(pids)

    def unread_input(self) -> int | None:
        return self._process.unread_input()

    def hidden_prompt(self) -> str | None:
        """The prompt line when a program is provably waiting, echo off, for a line.

        Proof is the exact stdin-wait probe: a member of the foreground group is blocked
        reading this terminal in line mode with ECHO off, no output is pending and no
        earlier input waits unread (it would be joined to the secret). None otherwise,
        and always None where the probe is not exact or a send is running.
        """
        if self._op is not None:
            return None
        return self._hidden_prompt_now()

    def _hidden_prompt_now(self) -> str | None:
        if not self._exact or self._closing or self._status.kind == "exited":
            return None
        foreground = self.foreground()
        if foreground is None or not foreground.input_hidden:
            return None
        if self._process.pending_output() or self._process.unread_input():
            return None
        return self._scrollback.open_line

    def shell_owns_foreground(self) -> bool:
        foreground = self._process.foreground_pgid()
        return foreground is not None and foreground == self._shell_pgid

    def foreground(self) -> Foreground | None:
        seen = self._process.inspect_foreground()
        if seen is not None and seen.leader_stamp is not None:
            self._wait_seen = seen
        return seen

    def shell_group(self) -> int | None:
        return self._shell_pgid

    def pending_output(self) -> int:
        return self._process.pending_output()

    def sole_member(self, pgid: int) -> bool:
        return self._process.sole_member(pgid)

    def foreground_group(self) -> int | None:
        return self._process.foreground_pgid()

    def foreground_listening(self) -> bool:
        foreground = self._process.foreground_pgid()
        if foreground is None or foreground == self._shell_pgid:
            return False
        for listener in self._new_listeners():
            try:
                if os.getpgid(listener.pid) == foreground:
                    return True
            except OSError:
                continue
        return False

    # -- listening sockets ------------------------------------------------------------

    def listening(self) -> tuple[Listener, ...]:
        """What the session's processes (its foreground and background jobs) listen on now.

        The shell itself is not looked at. One small read when the shell has no
        children, as at an idle prompt.
        """
        shell = self._shell_pgid
        if shell is None or self._status.kind == "exited":
            return ()
        seen = self._wait_seen  # read before the children: see _childless_stamp
        children = self._process.has_children(shell)  # a pread of a kept file
        if children is None:
            children = has_children(shell)
        if not children:
            if seen is not None and seen.process_group_id == shell:
                self._childless_stamp = seen.leader_stamp
            return ()
        self._childless_stamp = None
        return tuple(listeners(session_processes(shell)))

    def _new_listeners(self) -> tuple[Listener, ...]:
        """Listening sockets that were not listening when the latest input was written."""
        now = self.listening()
        if not now:
            return now
        before = self._listening_before
        return tuple(found for found in now if found.inode not in before)
