"""``terminal_search`` and ``ctx.terminals.search`` over real shells, production timing.

Every match is checked against ``terminal_read`` at the line number it reports, so the
two tools cannot number lines differently; a pattern that would backtrack forever in
Python's ``re`` is answered at once while another session keeps working.
"""

from __future__ import annotations

import asyncio
import json
import time
import types
from typing import Any

import pytest

from dsh_terminal_core import hookimpl
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.plugins import PluginInfo
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.registry import SearchRequest
from dsh_tool_terminal.config import DEFAULT_RESULT_BYTES

from ..helpers import full_access
from ..secrets.support import entry_point_plugins

# 5,000 lines of a build: every 1,000th step fails, and says so in capitals.
BUILD = (
    "awk 'BEGIN{for(i=1;i<=5000;i++) print (i%1000==0 ? "
    '"Error: step " i " failed" : "step " i " ok")}\''
)


async def shell(h: Harness, agent: Agent, text: str | None = None) -> str:
    sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
    if text is not None:
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text})
        assert sent.value["waitReason"] == "stdin_read", sent.text
    return str(sid)


async def read_line(h: Harness, agent: Agent, sid: str, number: int) -> str:
    page = await h.call_tool(
        agent, "terminal_read", {"sessionId": sid, "offset": number, "count": 1}
    )
    assert page.value["lineBegin"] == number, page.value
    return str(page.value["text"])


async def search(h: Harness, agent: Agent, sid: str, **args: Any) -> dict[str, Any]:
    found = await h.call_tool(agent, "terminal_search", {"sessionId": sid, **args})
    assert not found.is_error, found.text
    return dict(found.value)


async def test_matches_are_numbered_as_terminal_read_numbers_them() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent, BUILD)
        total = (await h.call_tool(agent, "terminal_read", {"sessionId": sid})).value
        literal = await search(h, agent, sid, pattern="failed")
        # The echoed command line holds the word too: the scrollback is searched as kept.
        assert len(literal["matches"]) == 6 and not literal["truncated"]
        assert literal["searched"] == {"lineBegin": 1, "lineEnd": total["totalLines"]}
        for match in literal["matches"]:
            assert await read_line(h, agent, sid, match["lineNumber"]) == match["line"]
        failures = [m for m in literal["matches"] if m["line"].startswith("Error")]
        assert [m["line"] for m in failures] == [f"Error: step {i}000 failed" for i in range(1, 6)]
        assert [m["lineNumber"] for m in failures] == [1 + i * 1000 for i in range(1, 6)]

        assert (await search(h, agent, sid, pattern="error: step"))["matches"] == []
        folded = await search(h, agent, sid, pattern="error: step", ignoreCase=True)
        # Line 1 is the command, whose awk program says "Error: step" too.
        assert [m["lineNumber"] for m in folded["matches"]] == [1, 1001, 2001, 3001, 4001, 5001]

        regex = await search(h, agent, sid, pattern=r"^step \d+ ok$", regex=True, maxMatches=3)
        assert [m["line"] for m in regex["matches"]] == [
            "step 4997 ok", "step 4998 ok", "step 4999 ok"
        ]  # fmt: skip
        assert regex["truncated"] and regex["matches"][-1]["lineNumber"] == 5000

        around = await search(h, agent, sid, pattern="step 3000 failed", context=2)
        [match] = around["matches"]
        number = match["lineNumber"]
        assert match["before"] == [await read_line(h, agent, sid, number - k) for k in (2, 1)]
        assert match["after"] == [await read_line(h, agent, sid, number + k) for k in (1, 2)]
        args = {"sessionId": sid, "pattern": "step 3000 failed", "context": 1}
        text = (await h.call_tool(agent, "terminal_search", args)).text
        assert text == (
            f"[{sid}: 1 match in lines 1-{total['totalLines']}, newest last]\n"
            "3000-step 2999 ok\n3001:Error: step 3000 failed\n3002-step 3001 ok"
        )


async def test_lines_trimmed_from_the_scrollback_keep_their_numbers() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent, "seq -f 'row %g' 12000")
        oldest = (await h.call_tool(agent, "terminal_read", {"sessionId": sid, "count": 1})).value
        assert oldest["lineBegin"] > 1 and oldest["truncated"]  # the default keeps 10,000
        found = await search(h, agent, sid, pattern="row 1", maxMatches=200)
        assert found["searched"]["lineBegin"] == oldest["lineBegin"]
        assert found["searched"]["lineEnd"] == oldest["totalLines"]
        for match in found["matches"][-5:]:
            assert await read_line(h, agent, sid, match["lineNumber"]) == match["line"]
        # Line n of the session shows row n - 1 (line 1 is the command).
        assert all(m["line"] == f"row {m['lineNumber'] - 1}" for m in found["matches"])


async def test_a_catastrophic_pattern_answers_at_once_while_another_session_works() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await shell(
            h,
            agent,
            "for i in $(seq 6000); do printf 'a%.0s' {1..50}; echo b; done; echo xaaa; true",
        )
        other = await shell(h, agent)
        settled: list[str] = []
        searches: list[float] = []

        async def keep_sending() -> None:
            for n in range(10):
                sent = await h.call_tool(
                    agent, "terminal_send", {"sessionId": other, "text": f"echo ping-{n}"}
                )
                settled.append(sent.value["waitReason"])

        async def keep_searching() -> list[dict[str, Any]]:
            values = []
            for _ in range(10):
                started = time.monotonic()
                values.append(await search(h, agent, sid, pattern="(a+)+$", regex=True))
                searches.append(time.monotonic() - started)
            return values

        # 6,000 lines of 52 characters: past what is searched inline, so in a thread.
        values, _ = await asyncio.gather(keep_searching(), keep_sending())
        assert max(searches) < 1.0, searches
        for value in values:  # the exact answer, not a stop: only the line ending in a
            assert [m["line"] for m in value["matches"]] == ["xaaa"]
        assert settled == ["stdin_read"] * 10


# A full default scrollback (4 MB) of lines over which RE2's automaton has too many
# states to cache: it falls back to simulating the NFA, about 0.4 s per MB here.
# ``choices`` makes it in under a second: one ``choice`` per character took 3.3 s here,
# past the silence tier's 3 s, so the send settled ``inferred_idle`` on a slower CPU.
RANDOM_AB = (
    'python3 -c "import random; r = random.Random(7); '
    "print('\\n'.join(''.join(r.choices('ab', k=390)) for _ in range(10000)))\""
)


async def test_a_pattern_too_costly_for_the_scrollback_is_stopped_within_a_second() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent, RANDOM_AB)
        other = await shell(h, agent)
        took: list[float] = []

        async def costly() -> str:
            started = time.monotonic()
            found = await h.call_tool(
                agent,
                "terminal_search",
                {"sessionId": sid, "pattern": "(?:(?:[ab]{30}a){30})c", "regex": True},
            )
            took.append(time.monotonic() - started)
            return found.text

        async def sends() -> list[str]:
            reasons = []
            for n in range(5):
                sent = await h.call_tool(
                    agent, "terminal_send", {"sessionId": other, "text": f"echo {n}"}
                )
                reasons.append(sent.value["waitReason"])
            return reasons

        text, reasons = await asyncio.gather(costly(), sends())
        assert text.startswith("error [INVALID_ARGUMENT]") and "within 0.9 s" in text, text
        assert took[0] < 1.0 + 0.3, took  # the budget, and a loaded machine
        assert reasons == ["stdin_read"] * 5
        # A pattern RE2 caches well is answered over the same lines, exactly.
        found = await search(h, agent, sid, pattern="^(?:a|b)+c$", regex=True)
        assert found["matches"] == [] and not found["truncated"]


async def test_another_agents_session_and_an_unknown_id_are_refused_as_reads_are() -> None:
    async with Harness(config=full_access()) as h:
        owner, intruder = h.create_agent("owner"), h.create_agent("owner")
        sid = await shell(h, owner, "echo private-data")
        for who, session, code in (
            (intruder, sid, "FOREIGN_SESSION"),
            (owner, "pty-99", "NO_SESSION"),
        ):
            read = await h.call_tool(who, "terminal_read", {"sessionId": session})
            found = await h.call_tool(
                who, "terminal_search", {"sessionId": session, "pattern": "private"}
            )
            assert found.is_error and found.text.startswith(f"error [{code}]")
            assert found.text == read.text and "private-data" not in found.text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"pattern": "("}, None),  # a literal: any characters
        ({"pattern": "(", "regex": True}, "missing )"),
        ({"pattern": "(?<=a)b", "regex": True}, "no backreferences or lookaround"),
        ({"pattern": "x" * 1001}, "longer than 1000 characters"),
        ({"pattern": ""}, "at least 1 character"),
        ({"pattern": "a\nb"}, "line break"),
        ({"pattern": "x", "context": 6}, "'context' must be <= 5"),
        ({"pattern": "x", "context": -1}, "'context' must be >= 0"),
        ({"pattern": "x", "maxMatches": 0}, "'maxMatches' must be >= 1"),
        ({"pattern": "x", "maxMatches": 201}, "'maxMatches' must be <= 200"),
        ({"pattern": "x", "regex": "yes"}, "'regex' must be of type boolean"),
    ],
)
async def test_bad_arguments_are_invalid(args: dict[str, Any], says: str | None) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent, "echo 'one (two'")
        found = await h.call_tool(agent, "terminal_search", {"sessionId": sid, **args})
        if says is None:
            assert not found.is_error and found.value["matches"][-1]["line"] == "one (two"
            return
        assert found.is_error and found.text.startswith("error [INVALID_ARGUMENT]"), found.text
        assert says in found.text


@pytest.mark.parametrize("cap", [DEFAULT_RESULT_BYTES, 4096])
async def test_the_result_stays_within_the_model_sized_bound(cap: int) -> None:
    config = full_access(**{"tool-terminal": {"max_result_bytes": cap}})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent, "for i in $(seq 300); do printf 'hit %d %0900d\\n' $i 0; done")
        found = await h.call_tool(
            agent,
            "terminal_search",
            {"sessionId": sid, "pattern": "hit ", "context": 5, "maxMatches": 200},
        )
        assert not found.is_error and found.value["truncated"]
        assert len(found.text.encode()) <= cap
        assert len(json.dumps(found.value, ensure_ascii=False).encode()) <= cap
        newest = found.value["matches"][-1]
        assert newest["line"].startswith("hit 300 ") and newest["line"].endswith("…")
        assert "older matches left out" in found.text


def plugin_calling_search() -> types.ModuleType:
    """A plugin whose tool counts a session's error lines through ``ctx.terminals``."""
    module = types.ModuleType("error_counter")

    @hookimpl
    def dsh_plugin_info() -> PluginInfo:
        return PluginInfo(name="error-counter", inject=("terminals",))

    @hookimpl
    def dsh_apply(ctx: Any, config: object) -> None:
        async def count(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
            result = await ctx.terminals.search(
                exec_.agent,
                args["sessionId"],
                SearchRequest(pattern="error", ignore_case=True, max_matches=200),
            )
            return {"errors": [m.line_number for m in result.matches]}

        ctx.tools.register(
            Tool(
                name="count_errors",
                description="Line numbers (from 0) of a session's error lines.",
                parameters={
                    "type": "object",
                    "properties": {"sessionId": {"type": "string"}},
                    "required": ["sessionId"],
                    "additionalProperties": False,
                },
                execute=count,
                output_schema={"type": "object"},
            )
        )

    module.dsh_plugin_info = dsh_plugin_info  # type: ignore[attr-defined]
    module.dsh_apply = dsh_apply  # type: ignore[attr-defined]
    return module


async def test_a_plugin_searches_through_ctx_terminals_as_its_caller() -> None:
    plugins = [*entry_point_plugins(), plugin_calling_search()]
    async with Harness(plugins, config=full_access()) as h:
        agent, other = h.create_agent("a"), h.create_agent("b")
        sid = await shell(h, agent, BUILD)
        counted = await h.call_tool(agent, "count_errors", {"sessionId": sid})
        # Numbered as terminal_read numbers them, here too (line 1 is the command with its
        # "Error: step").
        assert counted.value == {"errors": [1, 1001, 2001, 3001, 4001, 5001]}
        refused = await h.call_tool(other, "count_errors", {"sessionId": sid})
        assert refused.is_error and refused.text.startswith("error [FOREIGN_SESSION]")


async def test_a_secret_a_program_prints_is_never_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """§17 says a secret never shows; a program that prints it anyway shows ``[secret]``."""
    secret = "s3cr3t-value-never-shown"
    monkeypatch.setenv("SEARCH_TEST_SECRET", secret)
    config = full_access(secrets={"env": {"token": "SEARCH_TEST_SECRET"}})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = await shell(h, agent)
        asked = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "read -r -s -p 'Token: ' tok; echo; echo \"got $tok\""},
        )
        assert asked.value["inputHidden"] is True, asked.text
        typed = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "secret": {"name": "token"}}
        )
        assert typed.value["viewport"].splitlines()[-1] == "got [secret]", typed.text
        later = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo done"})
        assert later.value["viewport"] == "done\n"  # the send is over: output as it is
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        for fold in (False, True):
            found = await search(h, agent, sid, pattern=secret[:8], ignoreCase=fold)
            assert found["matches"] == []
        got = await search(h, agent, sid, pattern="got ")
        assert [m["line"] for m in got["matches"]][-1] == "got [secret]"
        for text in (typed.text, page.text, json.dumps(got)):
            assert secret not in text
