"""The recording wrapper around a terminal process: every backend's bytes pass through it.

The provider hands each process a session's spawn starts through the recorder
(:meth:`~dsh_terminal_core.provider.LocalTerminalProvider.add_process_wrapper`), which
returns a :class:`RecordingProcess`. It is the process to its backend in every way; it
also tells the session's :class:`~.cast.CastRecording` of the output the backend is
handed, the input it writes and the window sizes it sets, and ends the recording once
the process is torn down.
"""

from __future__ import annotations

import asyncio

from ..provider.inspector import ReaderWait
from ..provider.types import ExitStatus, Foreground, OutputHandler, TerminalProcess
from .cast import CastRecording

__all__ = ["RecordingProcess"]


class RecordingProcess:
    """A :class:`~dsh_terminal_core.provider.TerminalProcess` whose bytes are recorded."""

    __slots__ = ("_inner", "_recording")

    def __init__(self, inner: TerminalProcess, recording: CastRecording) -> None:
        self._inner = inner
        self._recording = recording

    @property
    def recording(self) -> CastRecording:
        return self._recording

    # -- what is recorded -----------------------------------------------------------------

    def set_output_handler(self, handler: OutputHandler | None) -> None:
        if handler is None:
            self._inner.set_output_handler(None)
            return
        record = self._recording.output

        def recorded(chunk: bytes) -> None:
            try:
                handler(chunk)
            finally:
                record(chunk)

        self._inner.set_output_handler(recorded)

    async def write(self, data: str | bytes) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._recording.input(payload)
        await self._inner.write(payload)

    def write_now(self, data: bytes) -> int:
        written = self._inner.write_now(data)
        if written:
            self._recording.input(data[:written])
        return written

    def resize(self, rows: int, cols: int) -> None:
        self._inner.resize(rows, cols)
        self._recording.resized(rows, cols)

    async def terminate(self) -> None:
        await self._inner.terminate()
        self._recording.close()
        await self._recording.wait_closed()

    # -- the rest, as the process itself --------------------------------------------------

    @property
    def pid(self) -> int:
        return self._inner.pid

    @property
    def done(self) -> asyncio.Future[ExitStatus]:
        return self._inner.done

    @property
    def exact_input_probe(self) -> bool:
        return self._inner.exact_input_probe

    def inspect_foreground(self) -> Foreground | None:
        return self._inner.inspect_foreground()

    def terminal_modes(self) -> tuple[bool, bool] | None:
        return self._inner.terminal_modes()

    def foreground_pgid(self) -> int | None:
        return self._inner.foreground_pgid()

    def pending_output(self) -> int:
        return self._inner.pending_output()

    def drain_output(self) -> None:
        self._inner.drain_output()

    def unread_input(self) -> int | None:
        return self._inner.unread_input()

    def flush_input(self) -> bool:
        return self._inner.flush_input()

    def wake_count(self, pid: int) -> int | None:
        return self._inner.wake_count(pid)

    def quietly_asleep(self, pid: int) -> bool | None:
        return self._inner.quietly_asleep(pid)

    def run_stamp(self, pid: int) -> bytes | None:
        return self._inner.run_stamp(pid)

    def ran_since(self, pid: int, stamp: bytes) -> bool:
        return self._inner.ran_since(pid, stamp)

    def executable_id(self, pid: int) -> tuple[int, int] | None:
        return self._inner.executable_id(pid)

    def has_children(self, pid: int) -> bool | None:
        return self._inner.has_children(pid)

    def sole_member(self, pgid: int) -> bool:
        return self._inner.sole_member(pgid)

    def is_reading_terminal(self, pid: int) -> bool:
        return self._inner.is_reading_terminal(pid)

    def reader_wait(self, pid: int) -> ReaderWait | None:
        return self._inner.reader_wait(pid)

    def set_shell_process_group(self, pgid: int) -> None:
        self._inner.set_shell_process_group(pgid)

    def signal_foreground(self, sig: str, expected_pgid: int | None = None) -> int:
        return self._inner.signal_foreground(sig, expected_pgid)
