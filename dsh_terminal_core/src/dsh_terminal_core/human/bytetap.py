"""The watch pages' byte tap: each session's own output, retained and followed (SPEC §31).

The browser's terminal (xterm.js) is fed what the program wrote, not a rendering of it:
that is how colours, the cursor, the alternate screen and a program's key modes reach
the page exactly. The provider hands every process a session's spawn starts through
:meth:`ByteTap.wrap`, which returns a :class:`TappedProcess`; it keeps the last
``retain_bytes`` of the session's output (what a page opened later replays), tells the
pages that follow the session of each new chunk and each resize, and forgets the
session once its process is torn down.

A secret typed by ``terminal_send {secret}`` (SPEC §17) is never echoed by a hidden
prompt; should a program echo it anyway, the tap shows ``[secret]`` instead, as the
recording does (the tap is a :class:`~dsh_terminal_core.registry.SendObserver`).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable

from ..kernel.subscribe import subscribe
from ..provider.delegating import DelegatingProcess
from ..provider.types import OutputHandler, TerminalProcess, TerminalSpawnSpec
from ..registry import SendOperation, SendRequest, SendResult, WaitReason, spawning_session

__all__ = ["DEFAULT_RETAIN_BYTES", "ByteTap", "SessionBytes", "TappedProcess"]

DEFAULT_RETAIN_BYTES = 128 * 1024
"""How much of a session's latest output a page opened later replays, at least: many
screens' worth, and a bounded cost for a thousand sessions (at most twice this each)."""
_SECRET_SHOWN = b"[secret]"
# A cut of the retained bytes moves forward to the next line start within this many
# bytes, so a replay rarely begins inside an escape sequence.
_CUT_SLACK = 4096

BytesListener = Callable[[bytes], None]

# DEC private modes set (h) or reset (l): the ones a replay that starts late must restore.
_PRIVATE_MODE = re.compile(rb"\x1b\[\?([0-9;]+)([hl])")
# The alternate screen is the screen model's to say; these are not restored from here.
_SCREEN_MODES = frozenset({47, 1047, 1048, 1049})


class SessionBytes:
    """One session's retained output, its window size, and the pages following it."""

    def __init__(self, session_id: str, *, rows: int, cols: int, retain_bytes: int) -> None:
        self.session_id = session_id
        self.rows = rows
        self.cols = cols
        self.ended = False
        #: Bytes cut from the front so far: a replay that does not start at the beginning.
        self.dropped = 0
        self._retain = retain_bytes
        self._data = bytearray()
        self._listeners: list[BytesListener] = []
        self._on_change: list[Callable[[], None]] = []
        self._secret: bytes | None = None
        #: What the session does, as an overview says it: ``running`` while a send is in
        #: flight or after one left its program running (timed out, matched), ``waiting
        #: for keys`` once one settled with the terminal waiting for input.
        self.activity = "waiting for keys"
        #: DEC private modes (``?1`` cursor keys, ``?25`` cursor shown, ``?2004``
        #: bracketed paste, mouse reports...) as the output last set them.
        self.modes: dict[int, bool] = {}

    def replay(self) -> bytes:
        """The retained output, oldest first."""
        return bytes(self._data)

    def follow(self, on_bytes: BytesListener, on_change: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_bytes`` with each new chunk and ``on_change`` on a resize or the end.

        Call it in the same loop turn as :meth:`replay`: nothing is then missed or repeated
        between the replay and the live chunks. Returns a function that stops both.
        """
        stop_bytes = subscribe(self._listeners, on_bytes)
        stop_change = subscribe(self._on_change, on_change)

        def stop() -> None:
            stop_bytes()
            stop_change()

        return stop

    def output(self, chunk: bytes) -> None:
        if self._secret is not None and self._secret in chunk:
            chunk = chunk.replace(self._secret, _SECRET_SHOWN)
        if b"\x1b" in chunk and b"\x1b[?" in chunk:  # memchr first: most output has none
            for numbers, which in _PRIVATE_MODE.findall(chunk):
                for number in numbers.split(b";"):
                    if number.isdigit() and int(number) not in _SCREEN_MODES:
                        self.modes[int(number)] = which == b"h"
        data = self._data
        data += chunk
        # Cut once twice what is kept has piled up: memory stays within twice it, and a
        # cut is rare (CPython drops a bytearray's front without moving the rest).
        if len(data) > 2 * self._retain + _CUT_SLACK:
            cut = len(data) - self._retain
            line = data.find(b"\n", cut, cut + _CUT_SLACK)
            cut = line + 1 if line >= 0 else cut
            del data[:cut]
            self.dropped += cut
        for listener in list(self._listeners):
            listener(chunk)

    def mode_prefix(self) -> bytes:
        """The escape sequences that put a fresh terminal in the output's modes now."""
        return b"".join(
            b"\x1b[?%d%s" % (number, b"h" if on else b"l") for number, on in self.modes.items()
        )

    def resized(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self._changed()

    def end(self) -> None:
        self.ended = True
        self._changed()

    def hide(self, secret: bytes | None) -> None:
        self._secret = secret or None

    def _changed(self) -> None:
        for callback in list(self._on_change):
            callback()


class TappedProcess(DelegatingProcess):
    """A terminal process whose output and window size the tap sees."""

    __slots__ = ("_bytes", "_tap")

    def __init__(self, inner: TerminalProcess, tapped: SessionBytes, tap: ByteTap) -> None:
        super().__init__(inner)
        self._bytes = tapped
        self._tap = tap

    def set_output_handler(self, handler: OutputHandler | None) -> None:
        if handler is None:
            self._inner.set_output_handler(None)
            return
        seen = self._bytes.output

        def tapped(chunk: bytes) -> None:
            try:
                handler(chunk)
            finally:
                seen(chunk)

        self._inner.set_output_handler(tapped)

    def resize(self, rows: int, cols: int) -> None:
        self._inner.resize(rows, cols)
        self._bytes.resized(rows, cols)

    async def terminate(self) -> None:
        try:
            await self._inner.terminate()
        finally:
            self._tap.forget(self._bytes)


class ByteTap:
    """Every session's :class:`SessionBytes`, by session id, while its process lives."""

    def __init__(self, retain_bytes: int = DEFAULT_RETAIN_BYTES) -> None:
        self._retain = retain_bytes
        self._sessions: dict[str, SessionBytes] = {}
        self._activity: list[Callable[[], None]] = []

    def watch_activity(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when a session is tapped or forgotten, or its activity changes."""
        return subscribe(self._activity, callback)

    def _active(self) -> None:
        for callback in list(self._activity):
            callback()

    def of(self, session_id: str) -> SessionBytes | None:
        return self._sessions.get(session_id)

    def wrap(self, process: TerminalProcess, spec: TerminalSpawnSpec) -> TerminalProcess:
        """The provider's wrapper: ``process`` tapped when a session's spawn started it."""
        session_id = spawning_session()
        if session_id is None or session_id in self._sessions:
            return process
        tapped = SessionBytes(session_id, rows=spec.rows, cols=spec.cols, retain_bytes=self._retain)
        self._sessions[session_id] = tapped
        self._active()
        return TappedProcess(process, tapped, self)

    def forget(self, tapped: SessionBytes) -> None:
        if self._sessions.get(tapped.session_id) is tapped:
            del self._sessions[tapped.session_id]
        tapped.end()
        self._active()

    # -- the registry's send observer: what a session does, a secret being typed -------

    def before_send(self, session_id: str, request: SendRequest) -> None:
        tapped = self._sessions.get(session_id)
        if tapped is None:
            return
        if request.secret is not None:
            tapped.hide(request.secret.reveal().encode("utf-8"))
        tapped.activity = "running"
        self._active()

    def after_send(
        self, session_id: str, request: SendRequest, operation: SendOperation | None
    ) -> None:
        tapped = self._sessions.get(session_id)
        if tapped is None:
            return
        if operation is None:
            tapped.hide(None)
            tapped.activity = "waiting for keys"
            self._active()
        else:
            operation.done.add_done_callback(functools.partial(self._settled, tapped))

    def _settled(self, tapped: SessionBytes, done: asyncio.Future[SendResult]) -> None:
        tapped.hide(None)
        reason = None if done.cancelled() or done.exception() else done.result().wait_reason
        tapped.activity = (
            "running" if reason in (WaitReason.TIMEOUT, WaitReason.MATCHED) else "waiting for keys"
        )
        self._active()
