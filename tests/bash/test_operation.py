"""A send's result as a caller awaits it: settled with the send, in the same loop step,
and a cancelled caller never cancels the send itself."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_bash.operation import BashSendOperation
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.registry import SendResult, SessionStatus, WaitReason


class _NeverCancel:
    async def _cancel_op(self, _op: BashSendOperation) -> None:
        raise AssertionError("not cancelled in these tests")


_never_cancel = _NeverCancel()


def _result(text: str) -> SendResult:
    return SendResult(
        viewport=text,
        wait_reason=WaitReason.STDIN_READ,
        session_status=SessionStatus.running(),
        truncated=False,
        exit_code=0,
    )


async def test_result_is_settled_in_the_same_step_as_done() -> None:
    op = BashSendOperation(1024, _never_cancel)
    first, second = op.result(), op.result()
    op.settle(_result("a"))
    # No loop turn in between: both are already settled when settle returns.
    assert first.done() and second.done()
    assert first.result() == second.result() == op.done.result()
    late = op.result()  # asked after the send settled
    assert late.done() and late.result().viewport == "a"


async def test_a_cancelled_caller_leaves_the_send_running() -> None:
    op = BashSendOperation(1024, _never_cancel)
    caller = asyncio.ensure_future(op.result())
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert not op.done.done()
    again = op.result()
    op.settle(_result("b"))
    assert (await again).viewport == "b"


async def test_a_failed_send_fails_its_waiters() -> None:
    op = BashSendOperation(1024, _never_cancel)
    waiter = op.result()
    op.fail(TerminalError("refused", "NOT_AT_SECRET_PROMPT"))
    with pytest.raises(TerminalError):
        await waiter
    with pytest.raises(TerminalError):
        await op.done
    op.settle(_result("ignored"))  # a settled send stays as it ended
    assert op.done.exception() is not None


async def test_waiters_follow_a_done_future_cancelled_from_outside() -> None:
    op = BashSendOperation(1024, _never_cancel)
    waiter = op.result()
    op.done.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def test_every_waiter_is_released_and_a_cancelled_one_stays_cancelled() -> None:
    """The first waiter is kept apart from later ones: all of them end with the send."""
    op = BashSendOperation(1024, _never_cancel)
    waiters = [op.result() for _ in range(4)]
    waiters[1].cancel()  # its caller gave up; the others still get the result
    op.settle(_result("c"))
    assert waiters[1].cancelled()
    assert [w.result().viewport for i, w in enumerate(waiters) if i != 1] == ["c"] * 3
    # Released in the same step as done, once: done's own callback is gone.
    await asyncio.sleep(0)
    assert all(w.done() for w in waiters)
