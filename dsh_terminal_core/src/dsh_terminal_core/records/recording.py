"""The recording service: one asciicast file per session, whichever backend runs it.

Two seams feed it, neither inside a backend: the provider hands every process a
session's spawn starts through :meth:`RecordingService.wrap` (the registry names the
session, :func:`~dsh_terminal_core.registry.spawning_session`), and the registry tells
it of every send (:class:`~dsh_terminal_core.registry.SendObserver`): a secret about to
be typed, and each settlement, recorded as a marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import tempfile
from typing import Any

import attrs

from ..kernel.config import positive_int
from ..kernel.errors import DshError, ErrorCode
from ..provider.env import child_environment
from ..provider.types import TerminalProcess, TerminalSpawnSpec
from ..registry.observers import spawning_session
from ..registry.types import SendOperation, SendRequest, SendResult
from .cast import CastRecording
from .link import FLUSH_INTERVAL_S, RecorderLink
from .tap import RecordingProcess

__all__ = ["DEFAULT_MAX_BYTES", "RecordingConfig", "RecordingService", "settlement_label"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def _absolute(value: object) -> object:
    if isinstance(value, str) and value:
        return os.path.abspath(os.path.expanduser(value))
    return value


def _writable_dir(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Create the directory if need be and prove a file can be made in it, now."""
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a directory path or null, got {value!r}")
    try:
        os.makedirs(value, mode=0o700, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dsh-recording-probe-", dir=value)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"recording dir {value!r} is not a writable directory: {exc.strerror or exc}"
        ) from None


@attrs.frozen(kw_only=True)
class RecordingConfig:
    """Config of the ``recording`` plugin.

    ``dir``: where each session's ``.cast`` file goes (created if missing, 0700); unset,
    nothing is recorded. ``max_bytes``: a session's recording ends, with a marker saying
    so, before its file grows past this (64 MiB).
    """

    dir: str | None = attrs.field(default=None, converter=_absolute, validator=_writable_dir)
    max_bytes: int = attrs.field(default=DEFAULT_MAX_BYTES, validator=positive_int)


class RecordingService:
    """Records every session spawned while it is installed; ``dispose`` ends them all.

    The recorder process (:mod:`.link`) starts with the service, which is made when the
    ``recording`` plugin applies with a ``dir``, and stops at :meth:`dispose`.
    """

    def __init__(self, config: RecordingConfig) -> None:
        if config.dir is None:
            raise ValueError("a RecordingService needs recording.dir")
        self._dir = config.dir
        self._max_bytes = config.max_bytes
        self._link: RecorderLink | None = None
        self._keys = itertools.count(1)
        self._live: dict[str, CastRecording] = {}
        self._by_key: dict[int, CastRecording] = {}  # until the recorder says closed
        self._timer: asyncio.TimerHandle | None = None
        self._disposed = False
        with contextlib.suppress(RuntimeError):  # no loop yet: started at the first session
            asyncio.get_running_loop()
            self._link_now()

    @property
    def directory(self) -> str:
        return self._dir

    @property
    def recorder_pid(self) -> int | None:
        """The recorder process's pid, once it runs."""
        return self._link.pid if self._link is not None else None

    def recording(self, session_id: str) -> CastRecording | None:
        """The open recording of ``session_id``, if it has one."""
        return self._live.get(session_id)

    def _link_now(self) -> RecorderLink:
        if self._link is None:
            self._link = RecorderLink(self._on_reply, self._on_lost)
        return self._link

    # -- the provider's wrapper -----------------------------------------------------------

    def wrap(self, process: TerminalProcess, spec: TerminalSpawnSpec) -> TerminalProcess:
        """Return ``process`` recorded, if a session's spawn started it; never raises."""
        session_id = spawning_session()
        if session_id is None or self._disposed or session_id in self._live:
            return process
        try:
            link = self._link_now()
            if link.lost:
                return process
            env = child_environment(spec.env)
            env.setdefault("SHELL", spec.argv[0] if spec.argv else "")
            recording = CastRecording(
                next(self._keys),
                self._dir,
                session_id,
                cols=spec.cols,
                rows=spec.rows,
                env=env,
                max_bytes=self._max_bytes,
                link=link,
                on_ended=self._forget,
            )
        except Exception:
            log.exception("cannot record session %s; it runs unrecorded", session_id)
            return process
        self._live[session_id] = recording
        self._by_key[recording.key] = recording
        self._tick_soon()
        return RecordingProcess(process, recording)

    def _forget(self, recording: CastRecording) -> None:
        if self._live.get(recording.session_id) is recording:
            del self._live[recording.session_id]

    # -- what the recorder process says ---------------------------------------------------

    def _on_reply(self, reply: dict[str, Any]) -> None:
        for kind in ("opened", "closed", "failed", "cut"):
            if kind in reply:
                break
        else:
            return
        recording = self._by_key.get(reply[kind])
        if recording is None:
            return
        if kind == "opened":
            recording.path = str(reply["path"])
        elif kind == "closed":
            del self._by_key[recording.key]
            recording.file_closed()
        elif kind == "failed":
            log.error(
                "recording of %s stopped (the session goes on): %s",
                recording.session_id,
                reply.get("why"),
            )
            recording.stopped()
        else:
            log.info(
                "recording of %s stopped at max_bytes (%d): %s",
                recording.session_id,
                self._max_bytes,
                reply.get("path"),
            )
            recording.stopped()

    def _on_lost(self, why: str) -> None:
        log.error("recordings stopped (the sessions go on): %s", why)
        for recording in list(self._by_key.values()):
            recording.stopped()
        self._by_key.clear()

    # -- the registry's send observer -----------------------------------------------------

    def before_send(self, session_id: str, request: SendRequest) -> None:
        recording = self._live.get(session_id)
        if recording is not None and request.secret is not None:
            recording.expect_secret(request.secret)

    def after_send(
        self, session_id: str, request: SendRequest, operation: SendOperation | None
    ) -> None:
        recording = self._live.get(session_id)
        if recording is None:
            return
        if operation is None:
            recording.forget_secret()
            return
        operation.done.add_done_callback(functools.partial(_settled, recording))

    # -- flushing and disposal ------------------------------------------------------------

    def _tick_soon(self) -> None:
        if self._timer is None and not self._disposed:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(FLUSH_INTERVAL_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._link is not None:
            self._link.flush()
        if self._live:
            self._tick_soon()

    async def dispose(self) -> None:
        """End every open recording and wait until the recorder wrote and closed the files."""
        self._disposed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for recording in list(self._live.values()):
            recording.close()
        if self._link is not None:
            await self._link.aclose()
        for recording in list(self._by_key.values()):
            recording.file_closed()
        self._by_key.clear()


def settlement_label(done: asyncio.Future[SendResult]) -> str:
    """The marker of a settled send: ``send: <waitReason> exit=<code>`` (``-``: no code)."""
    if done.cancelled():
        return "send: cancelled"
    error = done.exception()
    if error is not None:
        return f"send: error {error.code if isinstance(error, DshError) else ErrorCode.INTERNAL}"
    result = done.result()
    code = "-" if result.exit_code is None else str(result.exit_code)
    return f"send: {result.wait_reason.value} exit={code}"


def _settled(recording: CastRecording, done: asyncio.Future[SendResult]) -> None:
    recording.marker(settlement_label(done))
    recording.forget_secret()
