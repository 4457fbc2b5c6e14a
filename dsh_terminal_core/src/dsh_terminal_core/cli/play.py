"""``dsh-terminal play FILE.cast``: a recording played in the browser, no asciinema needed.

Starts the recording page (SPEC §31) on a loopback server, prints its link and serves it
until Ctrl-C. ``--audit FILE`` lists that audit log's entries about the recorded session,
each a link to its moment in the recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from ..kernel.harness import Harness

__all__ = ["play"]


async def _play(path: str, audit: str | None, until: asyncio.Event | None = None) -> int:
    async with Harness() as harness:
        if not harness.ctx.has("human"):
            print("dsh-terminal: the human plugin is not loaded", file=sys.stderr)
            return 2
        link = await harness.ctx.human.open_recording(path, ttl_s=None, audit=audit)
        if harness.ctx.human.web_assets() is None:
            print(
                "dsh-terminal: the player (asciinema-player) is not installed; run "
                "scripts/install.sh. The page offers the file for download.",
                file=sys.stderr,
            )
        print(f"recording page: {link.url}", flush=True)
        print("serving until Ctrl-C", file=sys.stderr, flush=True)
        stop = until or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0


def play(path: str, audit: str | None) -> int:
    """Serve the recording page of ``path`` until interrupted; the exit code."""
    return asyncio.run(_play(path, audit))
