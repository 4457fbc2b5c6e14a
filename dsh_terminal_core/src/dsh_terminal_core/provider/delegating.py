"""A terminal process that is another process in every way: the base of a wrapper.

A layer that wraps each spawned process
(:meth:`~.terminal.LocalTerminalProvider.add_process_wrapper`) to see its bytes — the
recorder (SPEC §23), the watch pages' byte tap (§31) — overrides only what it watches
and inherits the rest from here, so a method added to :class:`~.types.TerminalProcess`
is passed through in one place.
"""

from __future__ import annotations

import asyncio

from .inspector import ReaderWait
from .types import ExitStatus, Foreground, OutputHandler, TerminalProcess

__all__ = ["DelegatingProcess"]


class DelegatingProcess:
    """Passes every call of :class:`~.types.TerminalProcess` to ``inner`` unchanged.

    A wrapper stays as open as the process it wraps: it can be weakly referenced (a
    session is freed without the collector) and its methods replaced on the instance
    (a benchmark stamping each stage of a send, a test counting looks).
    """

    __slots__ = ("_inner", "__dict__", "__weakref__")

    def __init__(self, inner: TerminalProcess) -> None:
        self._inner = inner

    def set_output_handler(self, handler: OutputHandler | None) -> None:
        self._inner.set_output_handler(handler)

    async def write(self, data: str | bytes) -> None:
        await self._inner.write(data)

    def write_now(self, data: bytes) -> int:
        return self._inner.write_now(data)

    def resize(self, rows: int, cols: int) -> None:
        self._inner.resize(rows, cols)

    async def terminate(self) -> None:
        await self._inner.terminate()

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
