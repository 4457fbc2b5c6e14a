"""The four ``pty_*`` tools driven through the harness, against real interactive shells.

Every behaviour runs twice: under a fake ``terminals`` registry injected by container
override (the facade may rely only on the registry calls it declares) and under the real
registry. The shells behind both are real bash processes on real PTYs, with production
timing defaults.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psutil
import pytest

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access
from .fake_registry import FakeRegistry, fake_registry

KINDS = ["fake", "real"]


@contextlib.asynccontextmanager
async def pty_harness(
    kind: str, bash: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Harness, FakeRegistry | None]]:
    config = full_access(**({"terminal-bash": bash} if bash else {}))
    async with Harness(config=config) as h:
        if kind == "fake":
            async with fake_registry(h, BashConfig(**(bash or {}))) as registry:
                yield h, registry
        else:
            yield h, None


async def ok(h: Harness, agent: Any, tool: str, args: dict[str, Any]) -> Any:
    result = await h.call_tool(agent, tool, args)
    assert not result.is_error, result.text
    return result.value


async def error(h: Harness, agent: Any, tool: str, args: dict[str, Any]) -> str:
    result = await h.call_tool(agent, tool, args)
    assert result.is_error, result.text
    return result.text


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("kind", KINDS)
async def test_echo_round_trip_open_send_tail_close(kind: str) -> None:
    async with pty_harness(kind) as (h, registry):
        agent = h.create_agent("a")
        opened = await ok(h, agent, "pty_open", {"command": "echo opened-$((40+2))"})
        sid = opened["sessionId"]
        assert opened["status"] == {"kind": "running"}
        assert isinstance(opened["pid"], int)
        assert "opened-42" in opened["initialOutput"]

        sent = await ok(h, agent, "pty_send", {"id": sid, "data": "echo round-$((1+1))"})
        assert sent["status"] == {"kind": "running"}
        assert "round-2" in sent["delta"]

        tail = await ok(h, agent, "pty_tail", {"id": sid})
        assert "opened-42\n" in tail["text"] and "round-2\n" in tail["text"]
        assert tail["lines"] == tail["text"].count("\n") and not tail["truncated"]
        again = await ok(h, agent, "pty_tail", {"id": sid})
        assert again == {"text": "", "lines": 0, "truncated": False}

        result = await h.call_tool(agent, "pty_close", {"id": sid})
        assert result.value == {"closed": True} and result.text == f"closed {sid}"
        assert gone(opened["pid"])
        assert await ok(h, agent, "pty_close", {"id": sid}) == {"closed": False}
        if registry is not None:
            kinds = [call for call, _ in registry.calls]
            # pty_send asks the status first: a send to an exited session is refused.
            assert kinds[:4] == ["spawn", "start_send", "get_session", "start_send"]
            assert "kill" in kinds
            assert registry.closed == [sid]


@pytest.mark.parametrize("kind", KINDS)
async def test_tail_cursor_never_resends(kind: str) -> None:
    async with pty_harness(kind) as (h, _registry):
        agent = h.create_agent("a")
        sid = (await ok(h, agent, "pty_open", {"command": "true"}))["sessionId"]
        await ok(h, agent, "pty_tail", {"id": sid})  # skip the startup lines
        seen: list[str] = []
        for n in range(5):
            await ok(h, agent, "pty_send", {"id": sid, "data": f"echo item-{n}; echo item-{n}b"})
            tail = await ok(h, agent, "pty_tail", {"id": sid})
            items = [line for line in tail["text"].splitlines() if line.startswith("item-")]
            assert items == [f"item-{n}", f"item-{n}b"]
            seen.extend(items)
        assert (await ok(h, agent, "pty_tail", {"id": sid}))["lines"] == 0
        assert len(seen) == len(set(seen)) == 10
        # The facade and the tools share one cursor.
        await ok(h, agent, "pty_send", {"id": sid, "data": "echo shared"})
        assert "shared\n" in h.ctx.pty.tail(agent, sid).text
        assert (await ok(h, agent, "pty_tail", {"id": sid}))["lines"] == 0
        await ok(h, agent, "pty_close", {"id": sid})


@pytest.mark.parametrize("kind", KINDS)
async def test_tail_returns_newest_lines_and_truncated_when_more_accumulated(kind: str) -> None:
    async with pty_harness(kind) as (h, _registry):
        agent = h.create_agent("a")
        sid = (await ok(h, agent, "pty_open", {"command": "true"}))["sessionId"]
        await ok(h, agent, "pty_tail", {"id": sid})
        await ok(h, agent, "pty_send", {"id": sid, "data": "seq 1 50"})
        tail = await ok(h, agent, "pty_tail", {"id": sid, "lines": 10})
        assert tail["truncated"] is True and tail["lines"] == 10
        assert tail["text"] == "".join(f"{n}\n" for n in range(41, 51))
        result = await h.call_tool(agent, "pty_tail", {"id": sid})
        assert result.value == {"text": "", "lines": 0, "truncated": False}
        assert result.text.startswith("[0 new line(s)]")
        await ok(h, agent, "pty_close", {"id": sid})


@pytest.mark.parametrize("kind", KINDS)
async def test_tail_stays_correct_after_the_scrollback_trims(kind: str) -> None:
    async with pty_harness(kind, {"scrollback_lines": 50}) as (h, _registry):
        agent = h.create_agent("a")
        sid = (await ok(h, agent, "pty_open", {"command": "echo first"}))["sessionId"]
        first = await ok(h, agent, "pty_tail", {"id": sid})
        assert "first\n" in first["text"] and not first["truncated"]

        await ok(h, agent, "pty_send", {"id": sid, "data": "seq 1 200"})
        tail = await ok(h, agent, "pty_tail", {"id": sid, "lines": 1000})
        # Fewer lines than asked for, yet truncated: the backend trimmed new lines.
        assert tail["truncated"] is True
        numbers = [int(line) for line in tail["text"].splitlines()]
        assert 40 <= len(numbers) < 50 and tail["lines"] == len(numbers)
        assert numbers == list(range(201 - len(numbers), 201))

        await ok(h, agent, "pty_send", {"id": sid, "data": "echo after-trim"})
        after = await ok(h, agent, "pty_tail", {"id": sid, "lines": 1000})
        assert not after["truncated"]
        assert after["text"].endswith("after-trim\n")
        assert not any(line.isdigit() for line in after["text"].splitlines())
        await ok(h, agent, "pty_close", {"id": sid})


ENV_VALUES = {
    "SINGLE": "it's 'quoted'",
    "DOUBLE": 'say "hi" there',
    "SPACES": "  leading and trailing  ",
    "DOLLAR": "$HOME ${PATH} $(id) $((1+1))",
    "BACKTICK": "`echo nope` \\`",
    "BACKSLASH": "a\\b\\\\c\\n\\",
    "NEWLINES": "line one\nline two\n\nlast\n",
    "CONTROL": "tab\there\x1b[31m esc\x7f del",
    "UNICODE": "héllo wörld ✓",
    "EMPTY": "",
    "MIXED": "'\"$`\\\n' \"",
}


@pytest.mark.parametrize("kind", KINDS)
async def test_env_values_survive_exactly(kind: str) -> None:
    async with pty_harness(kind) as (h, _registry):
        agent = h.create_agent("a")
        names = list(ENV_VALUES)
        command = "for v in " + " ".join(f'"${n}"' for n in names)
        command += "; do printf '%s' \"$v\" | base64 -w0; echo; done"
        opened = await ok(h, agent, "pty_open", {"command": command, "env": ENV_VALUES})
        lines = opened["initialOutput"].splitlines()
        expected = [base64.b64encode(v.encode()).decode() for v in ENV_VALUES.values()]
        # An empty value prints an empty line; compare the run of lines that ends the output.
        assert lines[-len(expected) :] == expected
        # The variables are exported, not just set: a child process sees them.
        sent = await ok(
            h,
            agent,
            "pty_send",
            {"id": opened["sessionId"], "data": "env | grep -c '^SINGLE=it'\\''s'"},
        )
        assert sent["delta"].strip().endswith("1")
        await ok(h, agent, "pty_close", {"id": opened["sessionId"]})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"1BAD": "x"}, "not a valid shell identifier"),
        ({"A-B": "x"}, "not a valid shell identifier"),
        ({"": "x"}, "not a valid shell identifier"),
        ({"OK": "x", "SP ACE": "y"}, "not a valid shell identifier"),
        ({"HAS_NUL": "a\x00b"}, "NUL"),
    ],
)
async def test_invalid_env_is_rejected_before_anything_is_spawned(
    kind: str, env: dict[str, str], needle: str
) -> None:
    async with pty_harness(kind) as (h, registry):
        agent = h.create_agent("a")
        text = await error(h, agent, "pty_open", {"command": "echo hi", "env": env})
        assert text.startswith("error [INVALID_ARGUMENT]") and needle in text
        if registry is not None:
            assert registry.calls == []
        else:
            assert h.ctx.terminals.list(agent) == []
        wrong_type = await error(h, agent, "pty_open", {"command": "echo", "env": {"A": 1}})
        assert wrong_type.startswith("error [INVALID_ARGUMENT]")


@pytest.mark.parametrize("kind", KINDS)
async def test_every_operation_on_another_agents_session_is_foreign(kind: str) -> None:
    async with pty_harness(kind) as (h, registry):
        owner, intruder = h.create_agent("a"), h.create_agent("b")
        sid = (await ok(h, owner, "pty_open", {"command": "echo mine"}))["sessionId"]
        for tool, args in [
            ("pty_send", {"id": sid, "data": "echo stolen"}),
            ("pty_send", {"id": sid, "data": "", "submit": False}),
            ("pty_tail", {"id": sid}),
            ("pty_tail", {"id": sid, "lines": 1}),
            ("pty_close", {"id": sid}),
        ]:
            text = await error(h, intruder, tool, args)
            assert text.startswith("error [FOREIGN_SESSION]"), (tool, text)

        pty = h.ctx.pty
        checks = [
            pty.send(intruder, sid, {"data": "echo stolen"}),
            pty.close(intruder, sid),
        ]
        for attempt in checks:
            with pytest.raises(Exception) as caught:
                await attempt
            assert getattr(caught.value, "code", None) == "FOREIGN_SESSION"
        with pytest.raises(Exception) as caught:
            pty.tail(intruder, sid)
        assert getattr(caught.value, "code", None) == "FOREIGN_SESSION"

        # Nothing reached the session and the owner's cursor is untouched.
        tail = await ok(h, owner, "pty_tail", {"id": sid})
        assert "mine\n" in tail["text"] and "stolen" not in tail["text"]
        if registry is not None:
            assert sid in registry.sessions
        await ok(h, owner, "pty_close", {"id": sid})


@pytest.mark.parametrize("kind", KINDS)
async def test_owner_disposal_closes_every_session_even_with_a_send_in_flight(kind: str) -> None:
    async with pty_harness(kind) as (h, registry):
        agent, other = h.create_agent("a"), h.create_agent("b")
        pids = []
        sids = []
        for n in range(2):
            opened = await ok(h, agent, "pty_open", {"command": f"echo s{n}"})
            pids.append(opened["pid"])
            sids.append(opened["sessionId"])
        survivor = await ok(h, other, "pty_open", {"command": "echo other"})
        busy = asyncio.ensure_future(
            h.call_tool(agent, "pty_send", {"id": sids[0], "data": "sleep 30"})
        )
        await asyncio.sleep(0.3)
        assert not busy.done()

        await agent.dispose()  # the facade's effect and, for the real one, the registry's
        result = await asyncio.wait_for(busy, 10)
        assert result.value["status"]["kind"] == "exited"
        assert all(gone(pid) for pid in pids)
        assert h.ctx.pty.opened_sessions(agent) == []
        if registry is not None:
            assert sorted(registry.closed) == sorted(sids)
        else:
            assert h.ctx.terminals.list(agent) == []
        # The other agent's session is untouched.
        assert not gone(survivor["pid"])
        assert await ok(h, other, "pty_close", {"id": survivor["sessionId"]}) == {"closed": True}


@pytest.mark.parametrize("kind", KINDS)
async def test_facade_dispose_closes_all_of_its_sessions_and_refuses_new_ones(kind: str) -> None:
    async with pty_harness(kind) as (h, registry):
        a, b = h.create_agent("a"), h.create_agent("b")
        pids = [
            (await ok(h, a, "pty_open", {"command": "echo a"}))["pid"],
            (await ok(h, b, "pty_open", {"command": "echo b"}))["pid"],
        ]
        await h.ctx.pty.dispose()
        assert all(gone(pid) for pid in pids)
        if registry is not None:
            assert registry.sessions == {}
        text = await error(h, a, "pty_open", {"command": "echo late"})
        assert text.startswith("error [SERVICE_DISPOSING]")
        await h.ctx.pty.dispose()  # harmless a second time
        await a.dispose()  # the owner effects were removed; disposing finds nothing


async def test_tools_reject_bad_arguments_by_schema() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        assert (await error(h, agent, "pty_open", {})).startswith("error [INVALID_ARGUMENT]")
        assert "unknown argument" in await error(h, agent, "pty_open", {"command": "x", "shell": 1})
        text = await error(h, agent, "pty_tail", {"id": "pty-1", "lines": 0})
        assert text.startswith("error [INVALID_ARGUMENT]")
        text = await error(h, agent, "pty_send", {"id": "pty-1", "data": 5})
        assert text.startswith("error [INVALID_ARGUMENT]")
        # An id nobody has: send and tail say so, close is idempotent.
        assert (await error(h, agent, "pty_send", {"id": "pty-99", "data": ""})).startswith(
            "error [NO_SESSION]"
        )
        assert await ok(h, agent, "pty_close", {"id": "pty-99"}) == {"closed": False}
