"""The watch pages' byte tap (SPEC §31): each session's own bytes, replayed then followed."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio

from dsh_terminal_core.human.bytetap import SessionBytes
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import call_value, full_access
from .support import events, request


def test_the_retained_bytes_are_cut_at_a_line_start_and_stay_bounded() -> None:
    tapped = SessionBytes("s", rows=24, cols=80, retain_bytes=10_000)
    seen: list[bytes] = []
    stop = tapped.follow(seen.append, lambda: None)
    lines = [f"line {n:05d}\r\n".encode() for n in range(3000)]
    for line in lines:
        tapped.output(line)
    replay = tapped.replay()
    assert 10_000 <= len(replay) <= 12_500 + 4096
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

