"""One session's asciicast v2 recording, as the event loop sees it.

The file is ``DIR/<sessionId>-<UTC start as YYYYmmddTHHMMSSZ>.cast`` (mode 0600, never
overwritten: a name already taken gets ``-2``, ``-3``... before ``.cast``). Its first
line is the header, then one event per line, ``[seconds, code, text]``:

* ``o`` output as the terminal produced it, decoded as UTF-8 across chunk boundaries;
* ``i`` input written; a secret being typed is ``"[secret]"``, never its characters;
* ``m`` a marker (each send's settlement, the end of a recording cut at ``max_bytes``);
* ``r`` a resize, ``"COLSxROWS"``.

Here each event is stamped and handed to the recorder process as raw bytes
(:mod:`.link`, :mod:`.recorder_process`), which encodes and writes it. What must not
leave the harness is settled here: the characters of a secret being typed are replaced
by ``[secret]`` before anything is handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping

from ..kernel.secret import Secret
from .link import RecorderLink

__all__ = ["CLOSE_WAIT_S", "SECRET_SHOWN", "CastRecording"]

SECRET_SHOWN = "[secret]"
_SECRET_BYTES = SECRET_SHOWN.encode()
# How long a session's close waits for its file to be closed (a stuck disk: no longer).
CLOSE_WAIT_S = 2.0


class CastRecording:
    """The recording of one session; every method runs on the event loop and never raises.

    ``on_ended`` is called once, when the recording ends (closed, cut, failed), so its
    owner can forget it.
    """

    def __init__(
        self,
        key: int,
        directory: str,
        session_id: str,
        *,
        cols: int,
        rows: int,
        env: Mapping[str, str],
        max_bytes: int,
        link: RecorderLink,
        on_ended: Callable[[CastRecording], None],
    ) -> None:
        self.key = key
        self.session_id = session_id
        started = time.time()
        self._start = time.monotonic()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
        self.path = os.path.join(directory, f"{session_id}-{stamp}.cast")
        header = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(started),
            "env": {"TERM": env.get("TERM", ""), "SHELL": env.get("SHELL", "")},
            "title": session_id,
        }
        line = (json.dumps(header, ensure_ascii=False) + "\n").encode("utf-8")
        self._link = link
        self._on_ended = on_ended
        self._ended = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._secret: bytes | None = None  # still to be typed
        self._secret_seen = 0
        self._secret_value: bytes | None = None  # known while the send that types it runs
        link.submit(("open", key, self.path, line, max_bytes))

    @property
    def ended(self) -> bool:
        return self._ended

    # -- events ---------------------------------------------------------------------------

    def output(self, chunk: bytes) -> None:
        """Record output the terminal produced."""
        if self._ended:
            return
        value = self._secret_value
        if value is not None and value in chunk:
            chunk = chunk.replace(value, _SECRET_BYTES)  # never, even if a program echoed it
        self._link.submit(("o", self.key, time.monotonic() - self._start), chunk)

    def input(self, data: bytes) -> None:
        """Record input written to the terminal; the secret being typed is hidden."""
        if self._ended or not data:
            return
        secret = self._secret
        shown = b""
        if secret is not None:
            rest = secret[self._secret_seen :]
            # This write is (the next part of) the secret when one is a prefix of the other.
            typed = min(len(data), len(rest))
            if typed and data[:typed] == rest[:typed]:
                if self._secret_seen == 0:
                    shown = _SECRET_BYTES
                self._secret_seen += typed
                if self._secret_seen == len(secret):
                    self._secret = None
                data = data[typed:]
        value = self._secret_value
        if value is not None and value in data:
            data = data.replace(value, _SECRET_BYTES)
        data = shown + data
        if data:
            self._link.submit(("i", self.key, time.monotonic() - self._start), data)

    def marker(self, label: str) -> None:
        self._event("m", label)

    def resized(self, rows: int, cols: int) -> None:
        self._event("r", f"{cols}x{rows}")

    def expect_secret(self, secret: Secret) -> None:
        """The next write of exactly ``secret``'s characters is that secret: hide it."""
        value = secret.reveal().encode("utf-8")
        self._secret = value
        self._secret_seen = 0
        self._secret_value = value

    def forget_secret(self) -> None:
        """The send that typed (or was refused) the secret has settled."""
        self._secret = None
        self._secret_value = None

    def _event(self, code: str, text: str) -> None:
        if not self._ended:
            self._link.submit((code, self.key, time.monotonic() - self._start, text))

    # -- the end --------------------------------------------------------------------------

    def close(self) -> None:
        """End the recording with the session: what is queued is written, the file closed."""
        if self._ended:
            return
        self._link.submit(("close", self.key, time.monotonic() - self._start))
        self._link.flush()
        self._end()

    async def wait_closed(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Wait (at most ``timeout``) until the recorder closed the file after :meth:`close`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._closed), timeout)

    def file_closed(self) -> None:
        """The recorder says the file is closed (or never opened, or failed)."""
        if not self._closed.done():
            self._closed.set_result(None)

    def stopped(self) -> None:
        """The recorder ended this recording on its own (cut, failed): send nothing more."""
        self._end()
        self.file_closed()

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self._secret = self._secret_value = None
        self._on_ended(self)
