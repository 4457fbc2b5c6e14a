"""A closed shell session is freed by reference counting alone, after a send and after
the shell's own exit: nothing of it waits for a pass of the cyclic garbage collector."""

from __future__ import annotations

import weakref

import pytest

from dsh_terminal_core.registry import WaitReason

from ..helpers import harness, let_callbacks_run, open_shell, send


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("ending", ["close", "exit"])
async def test_a_closed_session_is_freed_without_the_collector(ending: str) -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        for _ in range(10):
            sid = await open_shell(h, agent)
            assert (await send(h, agent, sid, "echo hi")).wait_reason is WaitReason.STDIN_READ
            session = h.ctx.terminals.get_session(agent, sid)
            refs = [weakref.ref(session), weakref.ref(session._process)]
            del session
            if ending == "exit":
                result = await send(h, agent, sid, "exit")
                assert result.wait_reason is WaitReason.SESSION_EXIT
            await h.ctx.terminals.kill(agent, sid, "done")
            await let_callbacks_run()  # the close's callbacks let go of it
            assert [ref() for ref in refs] == [None, None]


@pytest.mark.usefixtures("no_collector")
async def test_a_cancel_token_reused_for_many_sends_keeps_none_of_them() -> None:
    """A caller may pass one long-lived token to every send; a send that has ended must
    let go of it (and of the send's output) instead of waiting for the token to go."""
    from dsh_terminal_core.kernel.cancel import Cancellation
    from dsh_terminal_core.registry import SendRequest

    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        token = Cancellation()
        refs = []
        for i in range(5):
            op = h.ctx.terminals.start_send(
                agent, sid, SendRequest(text=f"echo kept-{i}", cancel=token)
            )
            result = await op.done
            assert result.wait_reason is WaitReason.STDIN_READ
            assert f"kept-{i}" in result.viewport
            refs.append(weakref.ref(op))
            del op, result
        await let_callbacks_run()
        assert [ref() for ref in refs] == [None] * 5
        # The token still works for the send it is given next.
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30", cancel=token))
        token.cancel()
        result = await op.done
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code == 130
        await h.ctx.terminals.kill(agent, sid, "done")
