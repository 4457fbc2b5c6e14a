"""A send right after a cancel follows it: accepted at once, typed once the Ctrl-C has landed.

A cancelled send keeps the session until its interrupted command has stopped and the
prompt is back (milliseconds). A send that arrives in between is the caller's next
step after giving up on the first, so it is not refused with ``SEND_ACTIVE``: it starts
the moment the cancelled one releases the session. These tests start the second send in
the same loop step as the cancel, the tightest a client can follow it.
"""

from __future__ import annotations

import asyncio

import pytest

import dsh_terminal_bash.session as bash_session
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import OperationCancelled, TerminalError
from dsh_terminal_core.registry import SendRequest, WaitReason

from ..helpers import harness, open_shell, send

BOUND_S = 30


async def _running(h, agent, sid: str, text: str, **extra: object):  # type: ignore[no-untyped-def]
    """Start ``text`` and return once its command is running (its output has begun)."""
    op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text, **extra))
    session = h.ctx.terminals.get_session(agent, sid)
    while "started" not in session.scrollback.read(1, 10_000, 100_000).text:
        await asyncio.sleep(0.01)
    return op


async def test_a_send_in_the_step_after_a_cancel_is_accepted_and_typed_after_it() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        async with asyncio.timeout(BOUND_S):
            op = await _running(h, agent, sid, "echo started; sleep 5; echo SLEPT")
            await op.cancel()  # the Ctrl-C is out; the send has not settled yet
            assert not op.done.done()
            follower = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo back"))
            cancelled = await op.done
            after = await follower.done
        assert (cancelled.wait_reason, cancelled.exit_code) == (WaitReason.STDIN_READ, 130)
        assert (after.wait_reason, after.exit_code) == (WaitReason.STDIN_READ, 0)
        assert after.viewport == "back\n"
        page = await send(h, agent, sid, "echo done")
        assert page.viewport == "done\n"
        scrollback = h.ctx.terminals.get_session(agent, sid).scrollback.read(1, 1000, 100_000)
        assert "SLEPT\n" not in scrollback.text.replace("echo SLEPT", "")


async def test_a_cancellation_token_cancel_is_followed_the_same_way() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        token = Cancellation()
        async with asyncio.timeout(BOUND_S):
            op = await _running(h, agent, sid, "echo started; sleep 5", cancel=token)
            token.cancel()
            follower = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo next"))
            assert (await op.done).exit_code == 130
            assert (await follower.done).viewport == "next\n"


async def test_a_follower_cancelled_while_it_waits_types_nothing() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        async with asyncio.timeout(BOUND_S):
            # The interrupted program ignores SIGINT, so the follower is still waiting
            # when it is cancelled, however the loop is scheduled.
            op = await _running(h, agent, sid, "(trap '' INT; echo started; sleep 30)")
            await op.cancel()
            follower = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo never"))
            await follower.cancel()
            with pytest.raises(OperationCancelled):
                await follower.done
            assert not op.done.done()
        text = h.ctx.terminals.get_session(agent, sid).scrollback.read(1, 1000, 100_000).text
        assert "never" not in text


async def test_only_one_send_follows_a_cancel() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        async with asyncio.timeout(BOUND_S):
            op = await _running(h, agent, sid, "echo started; sleep 5")
            await op.cancel()
            first = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 0.2"))
            second = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo second"))
            with pytest.raises(TerminalError) as busy:
                await second.done
            assert busy.value.code == "SEND_ACTIVE"
            await op.done
            assert (await first.done).exit_code == 0


async def test_a_program_that_ignores_the_interrupt_still_gets_send_active(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bash_session, "_FOLLOW_CANCEL_S", 0.3)
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        async with asyncio.timeout(BOUND_S):
            op = await _running(
                h, agent, sid, "(trap '' INT; echo started; sleep 30)", timeout_ms=20_000
            )
            await op.cancel()
            follower = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo no"))
            with pytest.raises(TerminalError) as busy:
                await follower.done
            assert busy.value.code == "SEND_ACTIVE"
            assert "has not stopped" in busy.value.message
            assert not op.done.done()
