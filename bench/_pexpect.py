"""pexpect driving bash to its prompt with ``expect_exact``.

pexpect's own pauses are turned off (``delaybeforesend``) or shortened
(``delayafterclose``, ``delayafterterminate``) so it is measured at its fastest: its
defaults add 50 ms before every send and 100 ms to every close. pexpect is synchronous,
so its calls block the event loop; it takes no part in the concurrent scenario.
"""

from __future__ import annotations

import contextlib
import os
import signal
from itertools import count

import pexpect
from _env import PROMPT_BYTES, REPL_PROMPT, SHELL_ARGV, Expect, bench_environment

__all__ = ["PexpectDriver"]

_SHELL_PROMPT = b"\x07" + PROMPT_BYTES  # the end of the marker, then the prompt


class PexpectDriver:
    """Opens, drives and closes pexpect children; closes leftovers in :meth:`aclose`."""

    name = "pexpect"
    concurrent = False

    def __init__(self, owner_id: str) -> None:
        self._owner_id = owner_id
        self._ids = count(1)
        self._live: dict[int, pexpect.spawn] = {}

    async def open(self) -> pexpect.spawn:
        env = bench_environment(self._owner_id, f"pexpect-{next(self._ids)}")
        child = pexpect.spawn(
            SHELL_ARGV[0], SHELL_ARGV[1:], env=env, dimensions=(40, 160), maxread=65536
        )
        child.delaybeforesend = None
        for target in (child, child.ptyproc):
            target.delayafterclose = 0.0
            target.delayafterterminate = 0.001
        self._live[child.pid] = child
        try:
            child.expect_exact(_SHELL_PROMPT, timeout=30)
        except BaseException:
            await self.close(child)
            raise
        return child

    async def send(self, child: pexpect.spawn, text: str, expect: Expect = "prompt") -> str | None:
        child.send(text + "\r")
        child.expect_exact(REPL_PROMPT if expect == "repl" else _SHELL_PROMPT, timeout=60)
        return None

    async def close(self, child: pexpect.spawn) -> None:
        self._live.pop(child.pid, None)
        with contextlib.suppress(OSError):
            pgid = os.tcgetpgrp(child.child_fd)
            if pgid > 0 and pgid != child.pid:
                os.killpg(pgid, signal.SIGKILL)
        try:
            child.close(force=True)
        except Exception:
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)

    async def aclose(self) -> None:
        for child in list(self._live.values()):
            await self.close(child)
