"""Every session recorded as asciicast v2 (SPEC §23), with real shells and the real client."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.errors import ConfigError
from dsh_terminal_core.kernel.harness import Harness

from .support import (
    asciinema_cat,
    cast_files,
    events_of,
    only_cast,
    read_cast,
    records_config,
    records_harness,
    tmpfs,
)

_NAME = re.compile(r"^pty-\d+-\d{8}T\d{6}Z\.cast$")
UNICODE = "héllo ✓ 日本 🙂"


async def call(h: Harness, agent: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await h.call_tool(agent, tool, args)
    assert not result.is_error, result.text
    return dict(result.value)


async def test_asciinema_cat_prints_the_session_output_with_unicode(tmp_path: Path) -> None:
    recordings = tmp_path / "casts"
    async with records_harness(records_config(recordings)) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        sent = await call(h, agent, "terminal_send", {"sessionId": sid, "text": f"echo {UNICODE}"})
        assert sent["waitReason"] == "stdin_read"
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "false"})
        await call(h, agent, "terminal_resize", {"sessionId": sid, "rows": 30, "cols": 100})
        await call(h, agent, "terminal_close", {"sessionId": sid})

    path = only_cast(recordings)
    assert _NAME.match(path.name) and path.name.startswith(f"{sid}-"), path.name
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header, events = read_cast(path)
    assert header["version"] == 2 and header["title"] == sid
    assert (header["width"], header["height"]) == (160, 40)
    assert isinstance(header["timestamp"], int) and abs(header["timestamp"] - time.time()) < 120
    assert set(header["env"]) == {"TERM", "SHELL"} and header["env"]["TERM"] == "dumb"
    assert [e[0] for e in events] == sorted(e[0] for e in events)
    assert f"echo {UNICODE}\r" in events_of(events, "i")
    assert events_of(events, "m") == ["send: stdin_read exit=0", "send: stdin_read exit=1"]
    assert events_of(events, "r") == ["100x30"]

    printed = asciinema_cat(path)
    assert f"\r\n{UNICODE}\r\n" in printed
    assert printed == "".join(events_of(events, "o"))


async def test_a_character_split_between_two_reads_is_recorded_whole(tmp_path: Path) -> None:
    recordings = tmp_path / "casts"
    async with records_harness(records_config(recordings)) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        # "✓" is e2 9c 93: its first two bytes reach the terminal 0.3 s before the third.
        command = r"printf 'A\342\234'; sleep 0.3; printf '\223B\n'"
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": command})
        await call(h, agent, "terminal_close", {"sessionId": sid})
    _, events = read_cast(only_cast(recordings))
    output = events_of(events, "o")
    assert any(text.endswith("A") for text in output), output  # a chunk ends mid-character
    assert "A✓B" in "".join(output) and "\ufffd" not in "".join(output)


async def test_the_file_is_written_as_the_session_runs(tmp_path: Path) -> None:
    recordings = tmp_path / "casts"
    async with records_harness(records_config(recordings)) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo written-$((6*7))"})
        await asyncio.sleep(1.1)  # the bound: at most the last second is unwritten
        on_disk = only_cast(recordings).read_text()
        assert "written-42" in on_disk and "send: stdin_read exit=0" in on_disk
        await call(h, agent, "terminal_close", {"sessionId": sid})
        path = only_cast(recordings)
        assert not _open_in(h, path), "the file stays open after its session closed"
        _, events = read_cast(path)
        assert events_of(events, "m")[-1] == "send: stdin_read exit=0"


async def test_each_session_has_its_own_file_and_no_other_process_is_recorded(
    tmp_path: Path,
) -> None:
    recordings = tmp_path / "casts"
    async with records_harness(records_config(recordings)) as h:
        a, b = h.create_agent("a"), h.create_agent("b")
        one = (await call(h, a, "terminal_open", {"type": "shell"}))["sessionId"]
        two = (await call(h, b, "terminal_open", {"type": "shell", "screen": True}))["sessionId"]
        await call(h, a, "terminal_send", {"sessionId": one, "text": "echo from-one"})
        await call(h, b, "terminal_send", {"sessionId": two, "text": "echo from-two"})
    titles = [read_cast(p)[0]["title"] for p in cast_files(recordings)]
    assert sorted(titles) == sorted([one, two])
    assert all(p.name.startswith(f"{read_cast(p)[0]['title']}-") for p in cast_files(recordings))
    for path in cast_files(recordings):
        header, events = read_cast(path)
        mine = "from-one" if header["title"] == one else "from-two"
        other = "from-two" if mine == "from-one" else "from-one"
        text = "".join(events_of(events, "o"))
        assert mine in text and other not in text
        if header["title"] == two:
            assert header["env"]["TERM"] == "xterm-256color"


async def test_past_max_bytes_the_recording_ends_with_a_marker(tmp_path: Path) -> None:
    recordings = tmp_path / "casts"
    config = records_config(recordings, recording={"max_bytes": 8192})
    async with records_harness(config) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "seq 1 20000"})
        after = await call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo still-here"})
        assert "still-here" in after["viewport"]
    path = only_cast(recordings)
    assert path.stat().st_size <= 8192
    _, events = read_cast(path)
    assert events[-1][1:] == ["m", "recording stopped: max_bytes (8192) reached"]
    assert "still-here" not in path.read_text()


async def test_a_capped_recording_keeps_the_output_up_to_its_cap(tmp_path: Path) -> None:
    """SPEC §27.5: the chunk that passes the cap is cut, not dropped whole."""
    recordings = tmp_path / "casts"
    config = records_config(recordings, recording={"max_bytes": 65536})
    async with records_harness(config) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "seq 1 300000"})
    path = only_cast(recordings)
    assert 60_000 <= path.stat().st_size <= 65536
    _, events = read_cast(path)
    assert events[-1][1:] == ["m", "recording stopped: max_bytes (65536) reached"]
    output = "".join(event[2] for event in events if event[1] == "o")
    # Whole lines only: the cut can fall between a line's \r and its \n.
    numbers = re.findall(r"^(\d+)\r(?=\n)", output.split("seq 1 300000", 1)[1], re.MULTILINE)
    # Every line up to the cut, in order, and thousands of them, not the header alone.
    assert len(numbers) > 5000
    assert [int(n) for n in numbers] == list(range(1, len(numbers) + 1))
    # The asciinema client reads it back whole.
    played = subprocess.run(
        [str(Path(sys.executable).with_name("asciinema")), "cat", str(path)],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert f"\r\n{numbers[-1]}\r\n".encode() in played.stdout


async def test_a_full_disk_ends_the_recording_and_the_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with tmpfs(tmp_path / "small", "size=64k") as small:
        async with records_harness(records_config(small)) as h:
            agent = h.create_agent("a")
            sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
            # About 600 KB of output into a 64 KiB file system, in one send.
            big = await call(h, agent, "terminal_send", {"sessionId": sid, "text": "seq 1 100000"})
            assert big["waitReason"] == "stdin_read"
            await asyncio.sleep(1.1)  # the writer has met the full disk by now
            for n in range(3):
                sent = await call(
                    h, agent, "terminal_send", {"sessionId": sid, "text": f"echo alive-{n}"}
                )
                assert f"alive-{n}" in sent["viewport"] and sent["exitCode"] == 0
            await call(h, agent, "terminal_close", {"sessionId": sid})
            assert not _open_in(h, only_cast(small))
        stopped = [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]
        assert stopped and "No space left on device" in stopped[0], caplog.text
        assert sid in stopped[0]


async def test_a_recorder_process_that_dies_ends_the_recordings_not_the_sessions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    recordings = tmp_path / "casts"
    async with records_harness(records_config(recordings)) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo before"})
        await asyncio.sleep(1.1)  # handed over and written
        recorder = psutil.Process(h.ctx.recordings.recorder_pid)
        recorder.kill()
        recorder.wait(timeout=30)
        for n in range(3):
            sent = await call(h, agent, "terminal_send", {"sessionId": sid, "text": f"seq {n}00"})
            assert sent["exitCode"] == 0
            await asyncio.sleep(0.6)  # a flush interval: the pipe is written and found broken
        second = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": second, "text": "echo unrecorded"})
    assert "recordings stopped (the sessions go on)" in caplog.text
    assert [read_cast(p)[0]["title"] for p in cast_files(recordings)] == [sid]
    assert "before" in "".join(events_of(read_cast(only_cast(recordings))[1], "o"))


async def test_an_unwritable_dir_fails_at_startup_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    under_a_file = blocker / "casts"
    with pytest.raises(ConfigError) as caught:
        await Harness(config=records_config(under_a_file)).start()
    assert str(under_a_file) in caught.value.message and caught.value.key == "dir"

    with tmpfs(tmp_path / "ro", "size=64k,ro") as read_only:
        with pytest.raises(ConfigError) as caught:
            await Harness(config=records_config(read_only)).start()
        assert str(read_only) in caught.value.message
        assert "Read-only file system" in caught.value.message


async def test_recording_is_the_operators_no_tool_argument_turns_it_off(tmp_path: Path) -> None:
    async with records_harness(records_config(tmp_path / "casts")) as h:
        for schema in h.tool_schemas():
            names = " ".join(schema["parameters"].get("properties", {})).lower()
            assert "record" not in names, schema["name"]
    async with records_harness(records_config()) as h:  # no dir: nothing is recorded
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        await call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo off"})
        assert "recordings" not in dict(h.ctx.resolved_services())


def _open_in(h: Harness, path: Path) -> bool:
    """Whether this process or the recorder process holds ``path`` open."""
    for pid in ("self", h.ctx.recordings.recorder_pid):
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") == str(path):
                    return True
            except OSError:
                continue
    return False


CRASHING_HOST = textwrap.dedent(
    """
    import asyncio, sys
    from dsh_terminal_core.kernel.harness import Harness

    async def main():
        config = {"sandbox-policy": {"mode": "danger-full-access"},
                  "recording": {"dir": sys.argv[1]}}
        async with Harness(config=config) as h:
            agent = h.create_agent("doomed-host")
            sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
            await h.call_tool(agent, "terminal_send", {"sessionId": sid,
                "text": "echo before-the-$((6*7))-crash"})
            await asyncio.sleep(1.1)
            print("ready", h.ctx.recordings.recorder_pid, flush=True)
            await asyncio.sleep(120)

    asyncio.run(main())
    """
)


def test_a_host_killed_outright_loses_at_most_the_last_second(tmp_path: Path) -> None:
    recordings = tmp_path / "casts"
    host = subprocess.Popen(
        [sys.executable, "-c", CRASHING_HOST, str(recordings)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert host.stdout is not None
        ready = host.stdout.readline().split()
        assert ready[:1] == ["ready"], ready
        recorder = psutil.Process(int(ready[1]))
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=30)
        recorder.wait(timeout=30)  # its input ended: it closes the files and exits
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
    _, events = read_cast(only_cast(recordings))
    assert "before-the-42-crash" in "".join(events_of(events, "o"))
    assert events_of(events, "m") == ["send: stdin_read exit=0"]
