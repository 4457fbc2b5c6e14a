"""The gdb/MI example consumer: its MI parser and framer, and a real debugging session.

The session tests compile a small C program, then break, run, step past assignments,
read a local variable and run to exit — every byte through ``ctx.pty``, with the
production timing defaults of the bash backend.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from dsh_gdb_mi import (
    GdbMiError,
    GdbMiSession,
    MiFramer,
    RecordKind,
    parse_cstring,
    parse_line,
)
from dsh_gdb_mi import plugin as gdb_plugin
from dsh_terminal_bash import plugin as bash_plugin
from dsh_terminal_core.kernel import jobs_plugin as jobs
from dsh_terminal_core.kernel.errors import PluginLoadError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider import plugin as subprocess_local
from dsh_terminal_core.registry import plugin as terminals
from dsh_terminal_core.sandbox import (
    bwrap_plugin as sandbox_bwrap,
)
from dsh_terminal_core.sandbox import (
    policy_plugin as sandbox_policy,
)

from ..helpers import full_access

needs_gdb = pytest.mark.skipif(
    shutil.which("gdb") is None or shutil.which("gcc") is None, reason="needs gdb and gcc"
)

PROGRAM = """\
#include <stdio.h>

int main(void) {
    int counter = 7;
    counter = counter * 6;
    printf("counter is %d\\n", counter);
    return 0;
}
"""


# -- parser ---------------------------------------------------------------------------


def test_result_record_with_token_and_nested_tuples_and_lists() -> None:
    record = parse_line(
        '12^done,bkpt={number="1",type="breakpoint",thread-groups=["i1"],'
        'locations=[],meta={}},extra=[{a="1"},{a="2"}]'
    )
    assert record.kind is RecordKind.RESULT and record.is_result
    assert record.token == 12 and record.record_class == "done"
    assert record.results == {
        "bkpt": {
            "number": "1",
            "type": "breakpoint",
            "thread-groups": ["i1"],
            "locations": [],
            "meta": {},
        },
        "extra": [{"a": "1"}, {"a": "2"}],
    }


def test_list_of_results_keeps_each_name() -> None:
    record = parse_line('^done,stack=[frame={level="0",func="main"},frame={level="1"}]')
    assert record.token is None
    assert record.results["stack"] == [
        {"frame": {"level": "0", "func": "main"}},
        {"frame": {"level": "1"}},
    ]


def test_mi2_multi_location_breakpoint_and_repeated_names_are_gathered() -> None:
    record = parse_line('3^done,bkpt={number="1"},{number="1.1"},{number="1.2"}')
    assert record.results["bkpt"] == [{"number": "1"}, {"number": "1.1"}, {"number": "1.2"}]
    record = parse_line('=x,t={a="1",a="2",b="3"}')
    assert record.results["t"] == {"a": ["1", "2"], "b": "3"}


@pytest.mark.parametrize(
    ("line", "kind", "klass"),
    [
        ('*stopped,reason="breakpoint-hit",frame={line="4"}', RecordKind.EXEC, "stopped"),
        ('*running,thread-id="all"', RecordKind.EXEC, "running"),
        ('+download,section=".text"', RecordKind.STATUS, "download"),
        ('=library-loaded,id="/lib/libc.so.6"', RecordKind.NOTIFY, "library-loaded"),
        ("^exit", RecordKind.RESULT, "exit"),
        ('7^error,msg="No symbol \\"nope\\" in current context."', RecordKind.RESULT, "error"),
    ],
)
def test_async_and_result_classes(line: str, kind: RecordKind, klass: str) -> None:
    record = parse_line(line)
    assert record.kind is kind and record.record_class == klass and record.raw == line


def test_error_message_is_a_decoded_c_string() -> None:
    record = parse_line('7^error,msg="No symbol \\"nope\\" in current context."')
    assert record.results == {"msg": 'No symbol "nope" in current context.'}


@pytest.mark.parametrize(
    ("line", "kind", "text"),
    [
        ('~"3\\t    int counter = 7;\\n"', RecordKind.CONSOLE, "3\t    int counter = 7;\n"),
        ('@"target says hi\\n"', RecordKind.TARGET, "target says hi\n"),
        ('&"warning: \\"quoted\\" \\\\ done\\n"', RecordKind.LOG, 'warning: "quoted" \\ done\n'),
        ('~"\\302\\240nbsp \\x41 \\033[0m"', RecordKind.CONSOLE, "\u00a0nbsp A \x1b[0m"),
        ('~"caf\u00e9 \u2713"', RecordKind.CONSOLE, "caf\u00e9 \u2713"),
    ],
)
def test_stream_records_decode_their_c_string(line: str, kind: RecordKind, text: str) -> None:
    record = parse_line(line)
    assert record.kind is kind and record.text == text and record.results == {}


def test_prompt_and_non_mi_lines() -> None:
    assert parse_line("(gdb) ").kind is RecordKind.PROMPT
    assert parse_line("(gdb)").kind is RecordKind.PROMPT
    for line in (
        "counter is 42",
        "12-break-insert main",
        "=== banner ===",
        '^done,a="open',
        "^done,a=1",
        "~unquoted",
        "",
        '^done,x={a="1"',
        '~"a" trailing',
    ):
        record = parse_line(line)
        assert record.kind is RecordKind.OTHER, line
        assert record.text == line and record.raw == line


def test_parse_cstring_escapes() -> None:
    assert parse_cstring('"a\\nb\\tc\\\\d\\"e"') == 'a\nb\tc\\d"e'
    assert parse_cstring('"\\101\\102\\0103"') == "AB\x083"
    assert parse_cstring('"\\q"') == "\\q"  # undefined escape kept as written
    with pytest.raises(ValueError):
        parse_cstring('"unterminated')
    with pytest.raises(ValueError):
        parse_cstring('"done" and more')


def test_wire_form_omits_empty_fields() -> None:
    assert parse_line('5^done,value="42"').to_wire() == {
        "kind": "result",
        "token": 5,
        "class": "done",
        "results": {"value": "42"},
    }
    assert parse_line('~"hi\\n"').to_wire() == {"kind": "console", "text": "hi\n"}


# -- framer ---------------------------------------------------------------------------

TRANSCRIPT = [
    "dsh> gdb -q -i=mi2 ./prog; exit",
    '=thread-group-added,id="i1"',
    '~"Reading symbols from ./prog...\\n"',
    "(gdb) ",
    "1-break-insert main",
    '1^done,bkpt={number="1",line="4"}',
    "(gdb) ",
    "2-exec-run",
    '=thread-group-started,id="i1",pid="1"',
    "2^running",
    '*running,thread-id="all"',
    "(gdb) ",
    '~"Breakpoint 1, main () at prog.c:4\\n"',
    '*stopped,reason="breakpoint-hit",frame={line="4"}',
    "(gdb) ",
    "3-gdb-exit",
    "3^exit",
]


def test_framer_splits_a_transcript_into_responses_and_stops() -> None:
    framer = MiFramer()
    for echo in ("1-break-insert main", "2-exec-run", "3-gdb-exit"):
        framer.expect_echo(echo)
    framer.feed(TRANSCRIPT[:4])
    assert framer.take_response(1) is None
    banner = framer.take_until_prompt()
    assert banner is not None
    assert [r.kind for r in banner] == [RecordKind.OTHER, RecordKind.NOTIFY, RecordKind.CONSOLE]

    framer.feed(TRANSCRIPT[4:6])
    assert framer.take_response(1) is None  # no prompt after the result yet
    framer.feed(TRANSCRIPT[6:10])
    response = framer.take_response(1)
    assert response is not None and [r.token for r in response] == [1]
    assert framer.take_response(2) is None

    framer.feed(TRANSCRIPT[10:])
    running = framer.take_response(2)
    assert running is not None
    assert [(r.kind, r.record_class) for r in running] == [
        (RecordKind.NOTIFY, "thread-group-started"),
        (RecordKind.RESULT, "running"),
        (RecordKind.EXEC, "running"),
    ]
    stopped = framer.take_until_stopped()
    assert stopped is not None and stopped[-1].is_stopped
    assert stopped[-1].results["frame"] == {"line": "4"}
    assert framer.take_until_stopped() is None
    exit_response = framer.take_response(3)  # ^exit is never followed by a prompt
    assert exit_response is not None and exit_response[-1].record_class == "exit"
    assert framer.pending == []
    # Echoes were dropped, never returned as output.
    every = [*banner, *response, *running, *stopped, *exit_response]
    assert not any(r.raw.endswith(("-break-insert main", "-exec-run", "-gdb-exit")) for r in every)


# -- a real gdb through ctx.pty -------------------------------------------------------


def compile_program(tmp_path: Path) -> Path:
    source = tmp_path / "prog.c"
    source.write_text(PROGRAM)
    binary = tmp_path / "prog"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(binary), str(source)], check=True, timeout=60)
    return binary


def result_of(records: list[Any]) -> Any:
    [result] = [r for r in records if r.is_result]
    return result


def descendants_named(name: str) -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == name and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


@needs_gdb
async def test_debug_a_program_through_ctx_pty(tmp_path: Path) -> None:
    compile_program(tmp_path)
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("debugger")
        gdb = await GdbMiSession.open(h.ctx.pty, agent, args=["./prog"], cwd=str(tmp_path))
        assert any(
            r.kind is RecordKind.CONSOLE and "Reading symbols" in (r.text or "") for r in gdb.banner
        )
        assert descendants_named("gdb")

        bkpt = result_of(await gdb.command("-break-insert main"))
        assert bkpt.record_class == "done" and bkpt.token == 1
        assert bkpt.results["bkpt"]["func"] == "main"
        assert bkpt.results["bkpt"]["line"] == "4"

        run = await gdb.command("-exec-run")
        assert result_of(run).record_class == "running"
        stop = (await gdb.wait_for_stopped())[-1]
        assert stop.results["reason"] == "breakpoint-hit"
        assert stop.results["frame"]["line"] == "4"
        assert descendants_named("prog")  # the inferior is alive, stopped

        value = result_of(await gdb.command("-data-evaluate-expression counter"))
        assert value.record_class == "done"  # uninitialised: any value, but an answer

        for expected_line in ("5", "6"):  # past `counter = 7;`, then `counter *= 6`
            assert result_of(await gdb.command("-exec-next")).record_class == "running"
            stop = (await gdb.wait_for_stopped())[-1]
            assert stop.results["reason"] == "end-stepping-range"
            assert stop.results["frame"]["line"] == expected_line

        value = result_of(await gdb.command("-data-evaluate-expression counter"))
        assert value.results == {"value": "42"}
        local = result_of(await gdb.command("-stack-list-locals --all-values"))
        assert local.results == {"locals": [{"name": "counter", "value": "42"}]}
        error = result_of(await gdb.command("-data-evaluate-expression no_such_var"))
        assert error.record_class == "error"
        assert 'No symbol "no_such_var"' in error.results["msg"]

        assert result_of(await gdb.command("-exec-continue")).record_class == "running"
        tail = await gdb.wait_for_stopped()
        assert tail[-1].results["reason"] == "exited-normally"
        assert any(r.kind is RecordKind.OTHER and r.text == "counter is 42" for r in tail)

        exit_records = await gdb.exit()
        assert result_of(exit_records).record_class == "exit"
        assert not gdb.alive
        assert descendants_named("gdb") == [] and descendants_named("prog") == []
        assert h.ctx.terminals.list(agent) == []
        with pytest.raises(GdbMiError):
            await gdb.command("-gdb-version")


@needs_gdb
async def test_the_gdb_mi_tool_keeps_one_gdb_per_agent(tmp_path: Path) -> None:
    compile_program(tmp_path)
    async with Harness(config=full_access(str(tmp_path))) as h:
        assert "gdb-mi" in [p.name for p in h.plugins]
        agent, other = h.create_agent("a"), h.create_agent("b")

        async def call(who: Any, command: str, **extra: Any) -> Any:
            result = await h.call_tool(who, "gdb_mi", {"command": command, **extra})
            assert not result.is_error, result.text
            return result

        loaded = await call(agent, "-file-exec-and-symbols prog")
        sid = loaded.value["sessionId"]
        await call(agent, "-break-insert prog.c:5")
        run = await call(agent, "-exec-run")  # waits for *stopped by default
        kinds = [(r["kind"], r.get("class")) for r in run.value["records"]]
        assert ("result", "running") in kinds and kinds[-1] == ("exec", "stopped")
        assert run.value["records"][-1]["results"]["frame"]["line"] == "5"
        assert "*stopped" in run.text

        def stops(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [r for r in records if r["kind"] == "exec" and r.get("class") == "stopped"]

        step = await call(agent, "-exec-next", waitForStop=False)
        assert stops(step.value["records"]) == []
        value = await call(agent, "-data-evaluate-expression counter")
        # The step's *stopped, read meanwhile, comes first; then the answer.
        [stopped] = stops(value.value["records"])
        assert stopped["results"]["frame"]["line"] == "6"
        assert value.value["records"][-1]["results"] == {"value": "42"}
        assert value.value["sessionId"] == sid

        theirs = await call(other, "-gdb-version")
        assert theirs.value["sessionId"] != sid
        assert len(descendants_named("gdb")) == 2

        await agent.dispose()  # closes this agent's gdb and its stopped inferior
        assert len(descendants_named("gdb")) == 1 and descendants_named("prog") == []
        bye = await call(other, "-gdb-exit")
        assert bye.value["records"][-1]["class"] == "exit"
        assert descendants_named("gdb") == []
        assert h.ctx.terminals.list(other) == []
        bad = await h.call_tool(other, "gdb_mi", {"command": "-exec-next\n-gdb-exit"})
        assert bad.is_error and "one non-empty line" in bad.text


async def test_a_missing_gdb_fails_to_open_and_leaves_nothing(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        with pytest.raises(GdbMiError) as caught:
            await GdbMiSession.open(h.ctx.pty, agent, gdb=str(tmp_path / "no-gdb-here"))
        assert "gdb did not start" in str(caught.value)
        assert h.ctx.terminals.list(agent) == []
        assert h.ctx.pty.opened_sessions(agent) == []


async def test_loading_the_plugin_starts_nothing() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    async with Harness(config=full_access()) as h:
        assert "gdb_mi" in [s["name"] for s in h.tool_schemas()]
        plugin = next(p for p in h.plugins if p.name == "gdb-mi")
        assert plugin.info.inject == ("pty",) and plugin.info.provides == ()
        assert "terminal" not in " ".join(plugin.info.inject)
        assert {p.pid for p in psutil.Process().children(recursive=True)} == before


async def test_the_plugin_needs_pty_session_at_startup() -> None:
    core = [subprocess_local, terminals, sandbox_policy, sandbox_bwrap, jobs]
    harness = Harness(plugins=[*core, bash_plugin, gdb_plugin], config=full_access())
    with pytest.raises(PluginLoadError) as caught:
        await harness.start()
    assert str(caught.value) == (
        "plugin 'gdb-mi' injects 'pty' but no loaded plugin provides it; install dsh-pty-session"
    )
