"""Bad input from the model and from programs: control bytes, NULs, invalid UTF-8, floods,
oversize and ill-typed tool arguments. Nothing may crash (``error [INTERNAL]``) or hang.

Property tests drive a fresh harness per example with ``asyncio.run``: a session belongs to
the loop that opened it, and hypothesis runs examples one after another.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsh_terminal_bash import BashConfig
from dsh_terminal_bash.sanitizer import Sanitizer
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import ToolExec
from dsh_terminal_core.registry import ReadRequest, WaitReason
from dsh_terminal_core.registry.overstrike import render

from ..helpers import full_access, harness, open_shell, send

DEFAULTS = BashConfig()
# Examples per property test; raise it for a deeper run (FIGURES.md gives the command).
EXAMPLES = int(os.environ.get("RELIABILITY_FUZZ_EXAMPLES", "40"))
SETTLE_BOUND_S = 10.0  # far above every legitimate settle here; only a hang gets near it
T = TypeVar("T")


def run(body: Callable[[Harness, Agent], Awaitable[T]]) -> T:
    """Run ``body`` against a fresh harness on a fresh event loop."""

    async def main() -> T:
        async with Harness(config=full_access()) as h:
            return await body(h, h.create_agent("fuzz"))

    return asyncio.run(main())


# -- arbitrary typed input reaches programs intact ------------------------------------------


def cat_v(data: bytes) -> str:
    """What GNU ``cat -v`` prints for ``data``."""
    out = []
    for byte in data:
        meta = byte >= 0x80
        low = byte & 0x7F
        prefix = "M-" if meta else ""
        if low < 0x20 and (meta or low not in (0x09, 0x0A)):
            out.append(f"{prefix}^{chr(low + 0x40)}")
        elif low == 0x7F:
            out.append(f"{prefix}^?")
        else:
            out.append(prefix + chr(low))
    return "".join(out)


typed = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"]),
    min_size=1,
    max_size=300,
)

RAW_CAT_V = "stty raw -echo -iexten; cat -v"


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(typed, min_size=1, max_size=3))
@example(["\x00\x03\x04\x1a\x11\x13\x1c\x7f", "\r\n\t\x1b[31m\x1b]0;t\x07", "é漢\U0001f600"])
def test_any_text_typed_into_cat_v_arrives_byte_for_byte(pieces: list[str]) -> None:
    """Control characters typed with submit=False reach a raw-mode program as plain bytes:
    no signal, no EOF, no line editing; every send settles on the program's stdin read."""

    async def body(h: Harness, agent: Agent) -> list[Any]:
        sid = await open_shell(h, agent)
        ready = await send(h, agent, sid, RAW_CAT_V)
        assert ready.wait_reason is WaitReason.STDIN_READ
        results = []
        for piece in pieces:
            results.append(
                await asyncio.wait_for(send(h, agent, sid, piece, submit=False), SETTLE_BOUND_S)
            )
        return results

    results = run(body)
    for piece, result in zip(pieces, results, strict=True):
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.session_status.kind == "running"
        assert result.viewport == cat_v(piece.encode())


# Writes each hex line it reads as raw bytes: a program printing anything at all.
RAW_PRINTER = (
    "stty raw -echo -iexten; python3 -c "
    "'import os, sys; [os.write(1, bytes.fromhex(line)) for line in sys.stdin]'"
)


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=3))
@example([b"\x1b]133;D;0\x07dsh> ", b"\x1b]0;open", b"\xff\xfe\x9b[", b"\r", b"\n\x1b\\tail\xe6"])
def test_any_bytes_printed_match_the_sanitizer(pieces: list[bytes]) -> None:
    """A program printing arbitrary bytes (escapes, forged markers, C1, invalid UTF-8, lone
    CRs): each send settles, and the viewports add up to what the sanitizer makes of them."""

    async def body(h: Harness, agent: Agent) -> list[Any]:
        sid = await open_shell(h, agent)
        await send(h, agent, sid, RAW_PRINTER)
        return [
            await asyncio.wait_for(
                send(h, agent, sid, piece.hex() + "\n", submit=False), SETTLE_BOUND_S
            )
            for piece in pieces
        ]

    results = run(body)
    assert all(r.wait_reason is WaitReason.STDIN_READ for r in results)
    # Each send shows what its piece printed, backspaces applied within that viewport (a
    # BS cannot reach back into an earlier send's result).
    sanitizer = Sanitizer(max_escape_bytes=DEFAULTS.max_read_bytes)
    expected = "".join(render(sanitizer.feed(piece).text) for piece in pieces)
    assert "".join(r.viewport for r in results) == expected


# -- what programs print ---------------------------------------------------------------------


async def test_nul_bytes_printed_and_typed() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        printed = await send(h, agent, sid, r"printf 'a\0b\0\0c\n'")
        assert (printed.wait_reason, printed.exit_code, printed.viewport) == (
            WaitReason.STDIN_READ,
            0,
            "abc\n",
        )
        # A NUL typed into readline is not text; the command around it still runs.
        typed = await send(h, agent, sid, "echo left\x00right")
        assert (typed.wait_reason, typed.exit_code) == (WaitReason.STDIN_READ, 0)
        assert "\x00" not in typed.viewport and typed.viewport.endswith("leftright\n")
        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=100))
        assert "\x00" not in page.text
        after = await send(h, agent, sid, "echo fine")
        assert after.viewport == "fine\n"


async def test_invalid_utf8_becomes_replacement_characters() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        bad = await send(h, agent, sid, r"printf '\xff\xfe'; echo")
        assert (bad.wait_reason, bad.viewport) == (WaitReason.STDIN_READ, "\ufffd\ufffd\n")
        cut = await send(h, agent, sid, r"printf 'x\xe6\xbcy\n'")  # a 3-byte character cut short
        assert cut.viewport == "x\ufffdy\n"
        # One character split across two writes (two PTY reads) is decoded whole.
        split = await send(h, agent, sid, r"printf '\xe6'; sleep 0.1; printf '\xbc\xa2\n'")
        assert split.viewport == "漢\n"
        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=100)).text
        assert "\ufffd\ufffd" in page and "漢" in page


async def test_ten_megabytes_without_a_newline_settle_in_linear_time() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        session = h.ctx.terminals.get_session(agent, sid)
        timings = {}
        for size in (1_000_000, 10_000_000):
            started = time.perf_counter()
            result = await send(h, agent, sid, f"head -c {size} /dev/zero | tr '\\0' x; echo")
            timings[size] = time.perf_counter() - started
            assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, 0)
            assert result.truncated
            assert len(result.viewport.encode()) <= DEFAULTS.max_read_bytes
            # Head and tail of the one line, with the line that names what is omitted.
            [marker] = [line for line in result.viewport.split("\n") if line.startswith("[… ")]
            assert "bytes of line" in marker and "terminal_read offset=" in marker
            assert result.viewport.startswith("x") and result.viewport.endswith("x\n")
            assert set(result.viewport.replace(marker, "")) == {"x", "\n"}
            assert session.scrollback.retained_bytes <= DEFAULTS.scrollback_max_bytes
        # Ten times the output may take ten times as long (plus noise), never a hundred.
        assert timings[10_000_000] < 25 * timings[1_000_000] + 1.0, timings
        print(
            f"\nFIGURE flood: 1 MB in {timings[1_000_000]:.3f}s, 10 MB in "
            f"{timings[10_000_000]:.3f}s, scrollback {session.scrollback.retained_bytes} bytes"
        )
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        assert page.value["truncated"] and len(page.text.encode()) <= 262144
        after = await send(h, agent, sid, "echo after-flood")
        assert after.viewport == "after-flood\n"


# -- oversize and ill-typed tool arguments ------------------------------------------------------


async def test_oversize_arguments_are_refused_before_anything_runs() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        pty = await h.call_tool(agent, "pty_open", {"command": "cat"})
        big = "y" * 1_000_001
        calls = [
            ("terminal_send", {"sessionId": sid, "text": "echo " + big}),
            ("terminal_send", {"sessionId": sid, "text": "z" * 10_000_000, "submit": False}),
            ("pty_send", {"id": pty.value["sessionId"], "data": big}),
            ("pty_open", {"command": "echo " + "y" * 100_000}),
            ("terminal_open", {"type": "shell", "name": "n" * 65}),
            ("terminal_open", {"type": "shell", "cwd": "/" + "d" * 4096}),
            ("terminal_read", {"sessionId": "p" * 65}),
        ]
        for tool, args in calls:
            started = time.perf_counter()
            result = await h.call_tool(agent, tool, args)
            assert result.text.startswith("error [INVALID_ARGUMENT]"), (tool, result.text[:200])
            assert time.perf_counter() - started < 1.0
            assert len(result.text) < 1000  # the refusal does not echo the payload
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        assert "yyyy" not in page.value["text"] and "zzzz" not in page.value["text"]
        assert [
            s["sessionId"]
            for s in (await h.call_tool(agent, "terminal_list", {})).value["sessions"]
        ] == [
            sid,
            pty.value["sessionId"],
        ]


async def test_lone_surrogates_are_refused_before_anything_is_typed() -> None:
    """JSON may carry a lone surrogate (``"\\ud800"``) that has no UTF-8 encoding; it must be
    refused at once, not typed as nothing and then reported as a silent running command."""
    async with harness() as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        pty = (await h.call_tool(agent, "pty_open", {"command": "true"})).value["sessionId"]
        calls = [
            ("terminal_send", {"sessionId": sid, "text": "echo \ud800"}),
            ("terminal_send", {"sessionId": sid, "text": "\udcff", "submit": False}),
            ("terminal_send", {"sessionId": sid, "text": "echo \ud800", "run_in_background": True}),
            ("pty_send", {"id": pty, "data": "echo \udfff"}),
            ("pty_open", {"command": "echo \ud800"}),
            ("pty_open", {"command": "true", "env": {"A": "\ud800"}}),
        ]
        for tool, args in calls:
            started = time.perf_counter()
            result = await h.call_tool(agent, tool, args)
            assert result.text.startswith("error [INVALID_ARGUMENT]"), (tool, result.text)
            assert time.perf_counter() - started < 1.0, tool
        listed = (await h.call_tool(agent, "terminal_list", {})).value["sessions"]
        assert [s["sessionId"] for s in listed] == [sid, pty]  # a refused pty_open left nothing
        assert h.ctx.jobs.list(agent) == []
        after = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo fine"})
        assert (after.value["waitReason"], after.value["viewport"]) == ("stdin_read", "fine\n")


JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def json_value(kind: str) -> st.SearchStrategy[Any]:
    leaf = {
        "null": st.none(),
        "boolean": st.booleans(),
        "integer": st.integers(-(2**70), 2**70),
        # Not integral, so never a valid "integer" (JSON Schema accepts 3.0 as one).
        "number": st.sampled_from([math.nan, math.inf, -math.inf])
        | st.integers(-(10**9), 10**9).map(lambda n: n + 0.5),
        "string": st.text(max_size=20),
        "array": st.lists(st.integers(), max_size=3),
        "object": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    }
    return leaf[kind]


def valid_value(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in prop:
        return st.sampled_from(prop["enum"])
    kind = prop.get("type")
    if kind == "string":
        return st.text(
            min_size=prop.get("minLength", 0), max_size=min(prop.get("maxLength", 40), 40)
        )
    if kind == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        ints = st.integers(low, high if high is not None else 2**80)
        # JSON Schema counts 3.0 as an integer; the tools must cope with it too.
        return ints | ints.filter(lambda n: abs(n) < 2**52).map(float)
    if kind == "boolean":
        return st.booleans()
    if kind == "object":
        return st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)
    if kind == "array":
        return st.lists(
            valid_value(prop["items"]),
            min_size=prop.get("minItems", 0),
            max_size=min(prop.get("maxItems", 5), 5),
        )
    raise AssertionError(f"no strategy for {prop}")


def invalid_args(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that break ``schema`` in exactly one way each (plus valid filler)."""
    props: dict[str, dict[str, Any]] = schema["properties"]
    required: list[str] = schema.get("required", [])

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        args = {name: draw(valid_value(props[name])) for name in required}
        breaks = ["unknown"]
        if required:
            breaks.append("missing")
        if props:
            breaks += ["wrong_type", "range"]
        how = draw(st.sampled_from(breaks))
        if how == "unknown":
            extra = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in props))
            args[extra] = draw(st.sampled_from(JSON_TYPES).flatmap(json_value))
        elif how == "missing":
            del args[draw(st.sampled_from(required))]
        elif how == "wrong_type":
            name = draw(st.sampled_from(sorted(props)))
            own = props[name].get("type")
            allowed = {own} | ({"integer", "number"} if own == "number" else set())
            if name not in required:
                allowed.add("null")  # an optional argument given as null is left out
            kind = draw(st.sampled_from([t for t in JSON_TYPES if t not in allowed]))
            args[name] = draw(json_value(kind))
        else:
            candidates = [n for n, p in sorted(props.items()) if _breakable(p)]
            if not candidates:
                args[draw(st.text(min_size=1).filter(lambda k: k not in props))] = 1
                return args
            name = draw(st.sampled_from(candidates))
            args[name] = draw(_out_of_range(props[name]))
        return args

    return build()


def _breakable(prop: dict[str, Any]) -> bool:
    return bool({"enum", "minimum", "maximum", "minLength", "maxLength"} & set(prop))


def _out_of_range(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = []
    if "enum" in prop:
        options.append(st.text(max_size=12).filter(lambda v: v not in prop["enum"]))
    if "minimum" in prop:
        options.append(st.integers(max_value=prop["minimum"] - 1))
    if "maximum" in prop:
        options.append(st.integers(min_value=prop["maximum"] + 1))
    if prop.get("minLength", 0) > 0:
        options.append(st.just(""))
    if "maxLength" in prop:
        options.append(
            st.integers(prop["maxLength"] + 1, prop["maxLength"] + 50).map(lambda n: "w" * n)
        )
    return st.one_of(options)


def _schemas() -> dict[str, dict[str, Any]]:
    """Each tool's schema as its author wrote it, which the registry checks arguments by.

    Clients are offered it with every optional argument also nullable (null means left
    out, see ``dsh_terminal_core.toolschema``), so a null there breaks nothing.
    """

    async def collect() -> dict[str, dict[str, Any]]:
        async with Harness(config=full_access()) as h:
            return {name: dict(h.ctx.tools.get(name).parameters) for name in h.ctx.tools.names()}

    return asyncio.run(collect())


# The stack's own tools; consumer plugins installed beside it (consumers/) are not fuzzed.
FUZZED_TOOLS = {
    "terminal_open", "terminal_send", "terminal_read", "terminal_signal", "terminal_close",
    "terminal_list", "pty_open", "pty_send", "pty_tail", "pty_close", "job_output", "job_kill",
}  # fmt: skip
SCHEMAS = {name: schema for name, schema in _schemas().items() if name in FUZZED_TOOLS}


def test_every_tool_of_the_stack_is_fuzzed() -> None:
    assert set(SCHEMAS) == FUZZED_TOOLS


def _error_code(text: str) -> str | None:
    if not text.startswith("error ["):
        return None
    return text[len("error [") : text.index("]")]


async def _call(h: Harness, agent: Agent, tool: str, args: object) -> Any:
    exec_ = ToolExec(agent=agent)
    return await asyncio.wait_for(h.ctx.tools.call(tool, args, exec_), SETTLE_BOUND_S)


calls = st.sampled_from(sorted(SCHEMAS)).flatmap(
    lambda name: st.tuples(st.just(name), invalid_args(SCHEMAS[name]))
)
not_objects = st.one_of(
    st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(calls, min_size=1, max_size=25), not_objects)
def test_schema_violations_are_invalid_argument_on_every_tool(
    batch: list[tuple[str, Any]], junk: object
) -> None:
    async def body(h: Harness, agent: Agent) -> list[tuple[str, Any, str]]:
        out = [(tool, args, (await _call(h, agent, tool, args)).text) for tool, args in batch]
        for tool in sorted(SCHEMAS):
            out.append((tool, junk, (await _call(h, agent, tool, junk)).text))
        assert h.ctx.terminals.list(agent) == []
        return out

    for tool, args, text in run(body):
        assert _error_code(text) == "INVALID_ARGUMENT", (tool, args, text[:300])


# Valid by the schema, aimed at ids that do not exist or at a live session where that is
# safe (no random command is ever typed into a real shell).
SAFE_STABLE = {
    "NO_SESSION",
    "NO_JOB",
    "NO_BACKEND",
    "INVALID_ARGUMENT",
    "FOREIGN_SESSION",
    "SESSION_EXITED",
    # A batch may open two terminals with the same name: the second is refused by name.
    "DUPLICATE_NAME",
}


def valid_calls(live: bool) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    def args_for(tool: str) -> st.SearchStrategy[dict[str, Any]]:
        schema = SCHEMAS[tool]
        props = schema["properties"]
        required = set(schema.get("required", []))
        fixed: dict[str, st.SearchStrategy[Any]] = {}
        if tool == "terminal_open":
            fixed["type"] = st.text(min_size=1, max_size=20).filter(lambda t: t != "shell")
        for name in ("sessionId", "id"):
            if name in props:
                fake = st.text(min_size=1, max_size=64).filter(lambda s: s != "LIVE")
                fixed[name] = (
                    st.just("LIVE") | fake
                    if live and tool in {"terminal_read", "pty_tail"}
                    else fake
                )
        return st.fixed_dictionaries(
            {n: fixed.get(n, valid_value(props[n])) for n in props if n in required},
            optional={n: fixed.get(n, valid_value(props[n])) for n in props if n not in required},
        )

    tools = sorted(t for t in SCHEMAS if t != "pty_open")
    return st.sampled_from(tools).flatmap(lambda t: st.tuples(st.just(t), args_for(t)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(valid_calls(live=True), min_size=1, max_size=25))
def test_schema_valid_arguments_never_crash_or_hang(
    batch: list[tuple[str, dict[str, Any]]],
) -> None:
    async def body(h: Harness, agent: Agent) -> list[tuple[str, Any, str]]:
        sid = await open_shell(h, agent)
        await send(h, agent, sid, "seq 1 30")
        out = []
        for tool, args in batch:
            args = {
                k: (sid if v == "LIVE" and k in ("sessionId", "id") else v) for k, v in args.items()
            }
            result = await _call(h, agent, tool, args)
            out.append((tool, args, result.text))
        return out

    for tool, args, text in run(body):
        code = _error_code(text)
        assert code is None or code in SAFE_STABLE, (tool, args, text[:300])


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("terminal_read", {"offset": 3.0, "count": 2.0}),
        ("terminal_read", {"offset": 2**64}),
        ("pty_tail", {"lines": 5.0}),
        ("job_output", {"jobId": "job-1", "wait": True, "timeoutMs": 10.0}),
    ],
)
async def test_integral_floats_and_huge_ints_get_a_stable_answer(
    tool: str, args: dict[str, Any]
) -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        key = "id" if tool.startswith("pty_") else "sessionId"
        full = {key: sid, **args} if tool != "job_output" else args
        result = await h.call_tool(agent, tool, full)
        assert _error_code(result.text) in (None, "INVALID_ARGUMENT", "NO_JOB"), result.text
