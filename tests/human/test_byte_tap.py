"""The watch pages' byte tap (SPEC §31): each session's own bytes, replayed then followed."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio

from dsh_terminal_core.human.bytetap import SessionBytes
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import call_value, full_access, needs
from .support import events, request


def test_the_retained_bytes_are_cut_at_a_line_start_and_stay_bounded() -> None:
    tapped = SessionBytes("s", rows=24, cols=80, retain_bytes=10_000)
    seen: list[bytes] = []
    stop = tapped.follow(seen.append, lambda: None)
    lines = [f"line {n:05d}\r\n".encode() for n in range(3000)]
    for line in lines:
        tapped.output(line)
    replay = tapped.replay()
    assert 10_000 <= len(replay) <= 20_000 + 4096
    assert replay.startswith(b"line ") and replay.endswith(lines[-1])  # a whole line first
    assert tapped.dropped + len(replay) == sum(map(len, lines))
    assert b"".join(seen) == b"".join(lines)  # a follower gets every chunk
    stop()
    tapped.output(b"after\r\n")
    assert len(seen) == len(lines)


def test_a_resize_and_the_end_are_told_and_a_hidden_secret_never_shows() -> None:
    tapped = SessionBytes("s", rows=24, cols=80, retain_bytes=1000)
    changes: list[tuple[int, int, bool]] = []
    tapped.follow(lambda _: None, lambda: changes.append((tapped.rows, tapped.cols, tapped.ended)))
    tapped.resized(30, 100)
    tapped.hide(b"hunter2")
    tapped.output(b"echoed hunter2 by mistake\r\n")
    tapped.hide(None)
    tapped.end()
    assert changes == [(30, 100, False), (30, 100, True)]
    assert tapped.replay() == b"echoed [secret] by mistake\r\n"


async def test_the_stream_replays_the_sessions_bytes_then_follows_them(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Harness(config=full_access(str(tmp_path))) as h:
            agent = h.create_agent("a")
            sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
            await call_value(
                h, agent, "terminal_send", {"sessionId": sid, "text": r"printf '\e[31mred\e[0m\n'"}
            )
            url = (await call_value(h, agent, "terminal_watch", {"sessionId": sid}))["url"]
            async with events(url, path="stream") as stream:
                reset = await stream.until("reset")
                replay = base64.b64decode(reset["data"])
                assert b"\x1b[31mred\x1b[0m" in replay  # the program's own bytes, colours kept
                assert (reset["cols"], reset["rows"]) == (
                    h.ctx.human.tap.of(sid).cols,
                    h.ctx.human.tap.of(sid).rows,
                )
                assert (await stream.until("state"))["control"] == "agent"
                await call_value(
                    h, agent, "terminal_send", {"sessionId": sid, "text": "echo live-$((40+2))"}
                )
                live = b""
                while b"live-42" not in live:
                    live += base64.b64decode((await stream.until("out"))["data"])
                await call_value(
                    h, agent, "terminal_resize", {"sessionId": sid, "rows": 30, "cols": 100}
                )
                assert await stream.until("size") == {"cols": 100, "rows": 30}
                await call_value(h, agent, "terminal_close", {"sessionId": sid})
                assert (await stream.until("end"))["reason"] == "closed"
            gone = await request("GET", url + "/stream")
            assert gone.status == 404 and gone.body == b""


@needs("vim")
async def test_a_late_replay_of_a_screen_session_is_drawn_from_its_screen_model(
    tmp_path: Path,
) -> None:
    # Only 4 KiB kept: vim's screen is drawn long after the output the page could replay
    # began, so the page gets the model's screen, the alternate screen and vim's modes.
    config = full_access(str(tmp_path), human={"replay_bytes": 4096})
    with anyio.fail_after(60):
        async with Harness(config=config) as h:
            agent = h.create_agent("a")
            opened = await call_value(h, agent, "terminal_open", {"screen": True})
            sid = opened["sessionId"]
            await call_value(h, agent, "terminal_send", {"sessionId": sid, "text": "seq 1 5000"})
            (tmp_path / "notes.txt").write_text("first line of notes\n")
            vim = await call_value(
                h, agent, "terminal_send", {"sessionId": sid, "text": "vim -u NONE -N notes.txt"}
            )
            assert vim["screen"]["alternate"] is True
            assert h.ctx.human.tap.of(sid).dropped > 0
            url = (await call_value(h, agent, "terminal_watch", {"sessionId": sid}))["url"]
            async with events(url, path="stream") as stream:
                reset = await stream.until("reset")
            replay = base64.b64decode(reset["data"])
            assert replay.startswith(b"\x1b[?1049h\x1b[H\x1b[2J")
            assert b"first line of notes" in replay and b"seq 1 5000" not in replay
            assert b"\x1b[?1h" in replay  # vim's cursor-key mode, for the person's arrows
            row, col = h.ctx.terminals.read_screen(agent, sid).screen.cursor
            assert f"\x1b[{row + 1};{col + 1}H".encode() in replay
            await call_value(
                h, agent, "terminal_send", {"sessionId": sid, "keys": [":q!", "Enter"]}
            )


async def test_the_terminals_paths_answer_only_a_live_link(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Harness(config=full_access(str(tmp_path))) as h:
            agent = h.create_agent("a")
            sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
            short = await call_value(h, agent, "terminal_watch", {"sessionId": sid, "ttlS": 1})
            url = short["url"]
            live = await request("GET", url + "/asset/xterm.css")
            assert live.status == (200 if h.ctx.human.web_assets() else 404)
            # Only GET, only the pinned names; a cross-site post to them is nothing.
            for path, method in (("/stream", "POST"), ("/asset/xterm.js", "POST")):
                refused = await request(
                    method, url + path, {"data": "x"}, headers={"Origin": "http://evil.example"}
                )
                assert refused.status == 404 and refused.body == b""
            with anyio.fail_after(5):
                while any(link.live for link in h.ctx.human.links_of(agent, sid)):
                    await anyio.sleep(0.05)
            for path in ("", "/stream", "/events", "/asset/xterm.js"):
                gone = await request("GET", url + path)
                assert gone.status == 404 and gone.body == b"", path
