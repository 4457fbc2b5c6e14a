"""What the tool profiles (SPEC §30.1) share: one send awaited as the ``terminal_*`` tools await it.

A profile is only another shape over the same registry calls, so a cancelled call must
still be a real Ctrl-C and release the session, exactly as ``terminal_send`` does it.
"""

from __future__ import annotations

import asyncio
import signal

from dsh_terminal_core.kernel.tools import ToolExec
from dsh_terminal_core.registry import SendRequest, SendResult, TerminalSessionService, WaitReason

__all__ = ["SHELL_TYPE", "exit_code", "send_and_wait", "truncate_middle"]

#: The session type every profile opens: the bash backend's interactive shell.
SHELL_TYPE = "shell"


async def send_and_wait(
    terminals: TerminalSessionService, exec_: ToolExec, session_id: str, request: SendRequest
) -> SendResult:
    """Start ``request`` on ``session_id`` and return its result once readiness settles it.

    A cancelled caller interrupts the send (the backend's cancel is a Ctrl-C) and waits
    for that to settle before the cancellation propagates, so the session takes the next
    send at once.
    """
    op = terminals.start_send(exec_.agent, session_id, request)
    try:
        return await op.result()
    except asyncio.CancelledError:
        await asyncio.shield(op.cancel())
        raise


def truncate_middle(text: str, max_bytes: int, marker: str) -> tuple[str, bool]:
    """Keep the head and the tail of ``text`` within ``max_bytes`` UTF-8 bytes.

    ``marker`` is formatted with ``{removed}`` (the bytes cut) and replaces the middle:
    the first error of a build and its last lines both survive, as Codex and Claude Code
    both cut. Returns the text and whether anything was cut.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, False
    note = marker.format(removed=len(data) - max_bytes)
    room = max(0, max_bytes - len(note.encode()))
    head = data[: room // 2].decode("utf-8", "ignore")
    tail = data[len(data) - (room - room // 2) :].decode("utf-8", "ignore")
    return head + note + tail, True


def exit_code(result: SendResult) -> int | None:
    """The command's exit code when this call proved it exited, else None (still running).

    The shell's prompt back (``stdin_read`` with the shell's ``$?``) proves it; so does the
    shell itself ending (``exit 3``), reported as its exit status or 128 + its signal.
    """
    if result.wait_reason == WaitReason.STDIN_READ and result.exit_code is not None:
        return result.exit_code
    if result.wait_reason == WaitReason.SESSION_EXIT:
        status = result.session_status
        if status.exit_code is not None:
            return status.exit_code
        return 128 + _signal_number(status.signal)
    return None


def _signal_number(name: str | None) -> int:
    try:
        return int(signal.Signals[name]) if name else 0
    except KeyError:
        return 0
