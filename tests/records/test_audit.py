"""Every tool call audited (SPEC §23): one JSON line, written before the result returns."""

from __future__ import annotations

import asyncio
import datetime
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.cli.main import main
from dsh_terminal_core.kernel.errors import ConfigError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.secret import Secret
from dsh_terminal_core.records.audit import MAX_STRING_BYTES, redact_args

from .support import records_config, records_harness, tmpfs

KEYS = ["ts", "agent", "tool", "sessionId", "args", "outcome", "durationMs"]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_one_line_per_call_written_before_the_result_returns(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with records_harness(records_config(audit=audit)) as h:
        agent = h.create_agent("auditor")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        assert len(lines(audit)) == 1  # on disk the moment the call returned
        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "false"})
        assert lines(audit)[-1]["outcome"] == {
            "isError": False,
            "waitReason": "stdin_read",
            "exitCode": 1,
        }
        failed = await h.call_tool(agent, "terminal_send", {"sessionId": "pty-999", "text": "x"})
        assert failed.is_error
        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": 7})
        await h.call_tool(agent, "no_such_tool", {})
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})

    entries = lines(audit)
    assert [e["tool"] for e in entries] == [
        "terminal_open",
        "terminal_send",
        "terminal_send",
        "terminal_send",
        "no_such_tool",
        "terminal_close",
    ]
    first = entries[0]
    assert list(first) == KEYS and first["agent"] == "auditor" and first["sessionId"] == sid
    assert first["args"] == {"type": "shell"} and first["outcome"] == {"isError": False}
    began = datetime.datetime.fromisoformat(first["ts"])
    assert began.tzinfo is not None and first["ts"].endswith("Z")
    assert abs(began.timestamp() - datetime.datetime.now(datetime.UTC).timestamp()) < 120
    assert first["durationMs"] > 0
    assert entries[2]["outcome"] == {"isError": True, "code": "NO_SESSION"}
    assert entries[2]["sessionId"] == "pty-999"
    assert entries[3]["outcome"] == {"isError": True, "code": "INVALID_ARGUMENT"}
    assert entries[4]["outcome"] == {"isError": True, "code": "UNKNOWN_TOOL"}
    assert "sessionId" not in entries[4] and "identity" not in entries[4]
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600


async def test_the_log_is_appended_never_rewritten(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_text('{"kept": "from before"}\n')
    audit.chmod(0o600)
    for run in range(2):
        async with records_harness(records_config(audit=audit)) as h:
            await h.call_tool(h.create_agent(f"run-{run}"), "terminal_list", {})
    entries = lines(audit)
    assert entries[0] == {"kept": "from before"}
    assert [e["agent"] for e in entries[1:]] == ["run-0", "run-1"]


async def test_a_cancelled_call_is_audited_as_cancelled(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with records_harness(records_config(audit=audit)) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        call = asyncio.ensure_future(
            h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "sleep 30"})
        )
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert lines(audit)[-1]["outcome"] == {"isError": True, "code": "CANCELLED"}
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})


def test_secret_values_are_replaced_and_long_strings_cut() -> None:
    args = {
        "sessionId": "pty-1",
        "secret": {"name": "db"},  # the name of a secret, kept
        "passwordSecret": "login",  # ditto
        "password": "hunter2",
        "apiKey": "k-123",
        "nested": [{"token": "t-1"}, {"value": Secret("v-1")}],
        "text": "x" * 10_000,
        "unicode": "é" * 3000,
        "count": 3,
        "flag": True,
        "none": None,
    }
    shown = redact_args(args)
    assert shown["secret"] == {"name": "db"} and shown["passwordSecret"] == "login"
    assert shown["password"] == shown["apiKey"] == "[secret]"
    assert shown["nested"] == [{"token": "[secret]"}, {"value": "[secret]"}]
    assert redact_args({"secret": "raw value"}) == {"secret": "[secret]"}
    for key in ("text", "unicode"):
        assert len(shown[key].encode()) <= MAX_STRING_BYTES and "cut" in shown[key]
    assert shown["unicode"].startswith("é" * 100) and "\ufffd" not in shown["unicode"]
    assert (shown["count"], shown["flag"], shown["none"]) == (3, True, None)
    assert "hunter2" not in json.dumps(shown) and "v-1" not in json.dumps(shown)


async def test_an_unusable_file_fails_at_startup_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    shared = tmp_path / "shared.jsonl"
    shared.write_text("")
    shared.chmod(0o644)
    for path, why in (
        (tmp_path, "Is a directory"),
        (blocker / "audit.jsonl", "Not a directory"),
        (shared, "group or others"),
    ):
        with pytest.raises(ConfigError) as caught:
            await Harness(config=records_config(audit=path)).start()
        assert str(path) in caught.value.message and why in caught.value.message
        assert caught.value.key == "file"
    with (
        tmpfs(tmp_path / "ro", "size=64k,ro") as read_only,
        pytest.raises(ConfigError, match="Read-only file system"),
    ):
        await Harness(config=records_config(audit=read_only / "audit.jsonl")).start()


async def test_dsh_terminal_audit_prints_a_table_and_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with records_harness(records_config(audit=audit)) as h:
        a, b = h.create_agent("alice"), h.create_agent("bob")
        sid = (await h.call_tool(a, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(a, "terminal_send", {"sessionId": sid, "text": "echo hi"})
        await h.call_tool(b, "terminal_send", {"sessionId": sid, "text": "echo theirs"})
        await h.call_tool(b, "terminal_list", {})
        await h.call_tool(a, "terminal_close", {"sessionId": sid})
    with audit.open("a") as handle:
        handle.write("not json\n")

    assert main(["audit", str(audit)]) == 0
    out, err = capsys.readouterr()
    rows = out.splitlines()
    assert rows[0].split() == ["TIME", "AGENT", "TOOL", "SESSION", "OUTCOME", "MS", "ARGS"]
    assert len(rows) == 6 and "1 lines were not audit entries" in err
    assert "ok stdin_read exit=0" in out and "error FOREIGN_SESSION" in out
    assert '{"text":"echo hi"}' in out

    assert main(["audit", str(audit), "--agent", "bob"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 2 and all(" bob " in row for row in rows)

    assert main(["audit", str(audit), "--session", sid, "--agent", "alice"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[2] for row in rows] == ["terminal_open", "terminal_send", "terminal_close"]

    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
    assert main(["audit", str(audit), "--since", later.isoformat()]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # the heading alone
    earlier = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)).replace(
        tzinfo=None
    )
    assert main(["audit", str(audit), "--since", earlier.isoformat()]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6

    assert main(["audit", str(audit), "--since", "yesterday"]) == 2
    assert main(["audit", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
