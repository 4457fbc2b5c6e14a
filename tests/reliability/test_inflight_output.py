"""Output a program already wrote is never taken for silence.

Linux passes a PTY slave's writes to the master through a kernel work queue: right after
a program writes and blocks reading again, ``FIONREAD`` on the master may still be 0.
Readiness asks "is output still on its way?" before it trusts a stdin wait; answering
no while bytes are in flight settles a send without its last output (found by the
raw-printer property test under load, where the queue can lag by milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tty
from collections.abc import AsyncIterator

from dsh_terminal_core.provider.ptyio import PtyChannel

from ..helpers import until_true

ROUNDS = 2000


@contextlib.asynccontextmanager
async def _channel_on_a_pty() -> AsyncIterator[tuple[PtyChannel, int, list[bytes]]]:
    """A reading ``PtyChannel`` on a raw-mode PTY, the slave (for the test to write as the
    program) and the chunks delivered so far; both ends are closed afterwards."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    received: list[bytes] = []
    channel = PtyChannel(asyncio.get_running_loop(), master)
    channel.set_handler(received.append)
    channel.start()
    try:
        yield channel, slave, received
    finally:
        channel.close()
        os.close(slave)


async def test_bytes_written_by_the_program_always_count_as_pending() -> None:
    async with _channel_on_a_pty() as (channel, slave, received):
        for n in range(ROUNDS):
            payload = f"<{n}>".encode()
            os.write(slave, payload)
            before = sum(map(len, received))
            assert channel.pending() > 0 or sum(map(len, received)) > before, n
            channel.drain()
            assert b"".join(received).endswith(payload)


async def test_a_drain_right_after_the_program_wrote_delivers_every_byte() -> None:
    """The write fence: a drain takes in bytes still in the kernel's hand-over."""
    async with _channel_on_a_pty() as (channel, slave, received):
        for n in range(ROUNDS):
            payload = f"<{n}>".encode()
            os.write(slave, payload)
            channel.drain()
            assert b"".join(received).endswith(payload), n
        # Nothing readable: a drain delivers nothing and the master is still read.
        count = len(received)
        channel.drain()
        assert len(received) == count
        os.write(slave, b"after")
        await until_true(lambda: b"".join(received).endswith(b"after"))
        assert b"".join(received).endswith(b"after")
