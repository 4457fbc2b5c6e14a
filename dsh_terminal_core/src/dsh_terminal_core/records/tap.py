"""The recording wrapper around a terminal process: every backend's bytes pass through it.

The provider hands each process a session's spawn starts through the recorder
(:meth:`~dsh_terminal_core.provider.LocalTerminalProvider.add_process_wrapper`), which
returns a :class:`RecordingProcess`. It is the process to its backend in every way; it
also tells the session's :class:`~.cast.CastRecording` of the output the backend is
handed, the input it writes and the window sizes it sets, and ends the recording once
the process is torn down.
"""

from __future__ import annotations

from ..provider.delegating import DelegatingProcess
from ..provider.types import OutputHandler, TerminalProcess
from .cast import CastRecording

__all__ = ["RecordingProcess"]


class RecordingProcess(DelegatingProcess):
    """A :class:`~dsh_terminal_core.provider.TerminalProcess` whose bytes are recorded."""

    __slots__ = ("_recording",)

    def __init__(self, inner: TerminalProcess, recording: CastRecording) -> None:
        super().__init__(inner)
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
