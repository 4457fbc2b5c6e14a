"""The operator's pages (SPEC §31): a recording played in the page, an identity's overview.

In a real headless Chromium: a session's ``.cast`` plays to its end in asciinema-player
and the audit log's entries seek it to their moment; the overview lists a session when
it opens, shows its state and a live thumbnail, and drops it when it closes. Over plain
HTTP: the §22 properties on every new page and path (404 for guesses, expired links and
anything posted; no bearer token in a page; a strict CSP), the text view when the
browser assets are missing, and the HTTP server's overview link per identity.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_terminal_core.human.assets import load as load_assets
from dsh_terminal_core.kernel.harness import Harness

from ..browser import artifact, headless_page, needs_chromium, until
from ..helpers import call_value, full_access
from .support import events, request

BOUND_S = 120
have_assets = pytest.mark.skipif(
    load_assets() is None, reason="the browser assets are not installed (scripts/install.sh)"
)


def _recorded(tmp_path: Path) -> dict[str, Any]:
    return full_access(
        str(tmp_path),
        recording={"dir": str(tmp_path / "casts")},
        audit={"file": str(tmp_path / "audit" / "calls.jsonl")},
    )


@needs_chromium
@have_assets
async def test_a_recording_plays_to_its_end_and_the_overview_follows_sessions(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=_recorded(tmp_path)) as h:
            agent = h.create_agent("a")
            human = h.ctx.human
            overview = await human.open_overview(agent)
            async with headless_page() as page:
                # The overview: nothing yet, then a session as it opens, with its state.
                await page.goto(overview.url)
                await until(page, "document.getElementById('count').textContent.includes('0 live')")
                sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
                card = f".session[data-id='{sid}']"
                await until(page, f'document.querySelector("{card}")')
                await call_value(
                    h, agent, "terminal_send", {"sessionId": sid, "text": "echo first-$((2*3))"}
                )
                await until(
                    page,
                    f"document.querySelector(\"{card} .thumb\").textContent.includes('first-6')",
                )
                await until(
                    page, f"document.querySelector(\"{card}\").dataset.state === 'waiting for keys'"
                )
                watch = await page.get_attribute(f"{card} .watch", "href")
                assert watch is not None and "/watch/" in watch and watch != overview.url
                taken = await request("POST", watch + "/control", {"action": "take"})
                assert taken.json() == {"state": "person"}
                await until(
                    page,
                    f"document.querySelector(\"{card}\").dataset.state === 'a person in control'",
                )
                await page.screenshot(path=str(artifact("overview.png")))
                await request("POST", watch + "/control", {"action": "hand_back"})
                await call_value(
                    h, agent, "terminal_send", {"sessionId": sid, "text": "sleep 0.5; echo second"}
                )
                await call_value(h, agent, "terminal_close", {"sessionId": sid})
                await until(page, f'!document.querySelector("{card}")')
                await until(page, "document.getElementById('count').textContent.includes('0 live')")

                # The recording of that session, played to its end in the page.
                with anyio.fail_after(10):
                    while not (casts := glob.glob(str(tmp_path / "casts" / f"{sid}-*.cast"))):
                        await anyio.sleep(0.05)
                recording = await human.open_recording(casts[0])
                await page.goto(recording.url)
                await until(page, "window.dshPlayer")
                moments = await page.eval_on_selector_all(
                    "#audit a[data-t]", "(links) => links.map((a) => Number(a.dataset.t))"
                )
                assert len(moments) >= 3, moments  # open, two sends, close
                assert moments == sorted(moments)
                await page.evaluate("window.dshPlayer.play()")
                await until(page, "document.body.dataset.played === 'ended'", timeout_s=30)
                shown = await page.inner_text("#player")
                assert "first-6" in shown and "second" in shown, shown
                await page.screenshot(path=str(artifact("recording-ended.png")), full_page=True)
                # An audit entry's link seeks the player to its moment (the first send's:
                # the last entry, the close, can fall after the recording's last event).
                duration = await page.evaluate("window.dshPlayer.getDuration()")
                pick = next(i for i, t in enumerate(moments) if 0 < t < duration)
                await page.click(f"#audit li:nth-child({pick + 1}) a")
                await until(
                    page,
                    f"Math.abs(window.dshPlayer.getCurrentTime() - {moments[pick]}) < 0.5",
                )
                assert (await page.evaluate("location.hash")) == f"#t={moments[pick]}"

                # Without the browser files the watch page is the text view, and works.
                await _text_view_works(page, tmp_path)


async def _text_view_works(page: Any, tmp_path: Path) -> None:
    empty = tmp_path / "no-assets"
    empty.mkdir()
    config = full_access(str(tmp_path), human={"assets_dir": str(empty)})
    async with Harness(config=config) as h:
        agent = h.create_agent("b")
        sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
        await call_value(
            h, agent, "terminal_send", {"sessionId": sid, "text": "echo as-$((7))-text"}
        )
        link = await call_value(h, agent, "terminal_watch", {"sessionId": sid, "control": True})
        await page.goto(link["url"])
        assert await page.get_attribute("#mode", "data-mode") == "text"
        text = "document.getElementById('terminal').textContent"
        await until(page, f"{text}.includes('as-7-text')")
        await page.click("#take-control")
        await until(page, "document.body.dataset.control === 'person'")
        await page.click("#terminal")
        await page.keyboard.type("echo typed-$((8))")
        await page.keyboard.press("Enter")
        await until(page, f"{text}.includes('\\ntyped-8')")
        await page.click("#hand-back")
        await until(page, "document.body.dataset.control === 'agent'")
        await page.screenshot(path=str(artifact("text-view.png")))


async def test_the_operator_pages_keep_the_watch_links_promises(tmp_path: Path) -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=_recorded(tmp_path)) as h:
            agent = h.create_agent("a")
            human = h.ctx.human
            sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
            overview = await human.open_overview(agent, ttl_s=60)
            short = await human.open_overview(agent, ttl_s=1)
            recording = await human.open_session_recording(agent, sid)
            base = overview.url.rsplit("/", 1)[0]
            for link in (overview, recording):
                page = await request("GET", link.url)
                assert page.status == 200
                csp = page.headers["content-security-policy"]
                assert "script-src 'nonce-" in csp and "unsafe-inline" not in csp.split(";")[1]
                assert page.headers["x-frame-options"] == "DENY"
                assert page.headers["referrer-policy"] == "no-referrer"
                # Nothing can be posted to an operator's page, from any site.
                for path in ("", "/control", "/keys", "/events"):
                    posted = await request(
                        "POST",
                        link.url + path,
                        {"action": "take"},
                        headers={"Origin": "http://evil.example"},
                    )
                    assert posted.status == 404 and posted.body == b""
                # Only the pinned paths answer.
                for path in ("/x", "/asset/../../etc/passwd", "/asset/other.js", "/cast/.."):
                    other = await request("GET", link.url + path)
                    assert other.status == 404 and other.body == b""
            # Guesses, one character off, and an expired link learn nothing.
            for token in (
                "A" * 43,
                overview.token[:-1] + ("A" if overview.token[-1] != "A" else "B"),
            ):
                guessed = await request("GET", f"{base}/{token}")
                assert guessed.status == 404 and guessed.body == b""
            with anyio.fail_after(5):
                while short.live:
                    await anyio.sleep(0.05)
            expired = await request("GET", short.url)
            assert expired.status == 404 and expired.body == b""
            # The cast, to the recording link's holder; its assets only under its token.
            with anyio.fail_after(10):
                while not Path(recording.path).exists():
                    await anyio.sleep(0.05)
            cast = await request("GET", recording.url + "/cast")
            assert cast.status == 200 and cast.body.startswith(b'{"version": 2')
            asset = await request("GET", recording.url + "/asset/asciinema-player.js")
            assert asset.status == (200 if human.web_assets() else 404)
            # The overview's stream lists the session, with a watch link made for it.
            async with events(overview.url) as stream:
                listed = await stream.until("sessions", lambda d: d["sessions"])
            (entry,) = listed["sessions"]
            assert entry["id"] == sid and entry["watch"].startswith(base + "/")
            watch = await request("GET", entry["watch"])
            assert watch.status == 200
            # Bad input: a clear error with a stable code.
            with pytest.raises(Exception) as bad:
                await human.open_recording(str(tmp_path / "missing.cast"))
            assert getattr(bad.value, "code", None) == "INVALID_ARGUMENT"
            with pytest.raises(Exception) as bad_ttl:
                await human.open_overview(agent, ttl_s=0)
            assert getattr(bad_ttl.value, "code", None) == "INVALID_ARGUMENT"


async def test_without_the_browser_assets_the_page_shows_text_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "no-assets"
    empty.mkdir()
    config = full_access(str(tmp_path), human={"assets_dir": str(empty)})
    with anyio.fail_after(BOUND_S):
        async with Harness(config=config) as h:
            agent = h.create_agent("a")
            sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
            await call_value(
                h, agent, "terminal_send", {"sessionId": sid, "text": "echo as-$((1))-text"}
            )
            url = (await call_value(h, agent, "terminal_watch", {"sessionId": sid}))["url"]
            page = await request("GET", url)
            assert b'data-mode="text"' in page.body and b"not installed" in page.body
            assert b"xterm.js" in page.body  # it names what is missing
            missing = await request("GET", url + "/asset/xterm.js")
            assert missing.status == 404
            async with events(url) as stream:
                view = await stream.until("screen", lambda d: "as-1-text" in d["text"])
            assert "as-1-text" in view["text"]


async def test_the_http_server_prints_an_overview_link_per_identity(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from ..integration.test_mcp_http import TOKEN_A, TOKENS, connect, http_server

    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server:
            with anyio.fail_after(10):
                while sum("overview of identity" in line for line in server.lines) < len(TOKENS):
                    await anyio.sleep(0.05)
            links = {
                line.split("overview of identity ")[1].split(" ")[0].strip("'"): line.rsplit(
                    " ", 1
                )[1]
                for line in server.lines
                if "overview of identity" in line
            }
            assert set(links) == set(TOKENS.values())
            alice = links[TOKENS[TOKEN_A]]
            page = await request("GET", alice)
            assert page.status == 200 and TOKEN_A.encode() not in page.body
            async with connect(server.url, TOKEN_A) as session:
                opened = await session.call_tool("terminal_open", {})
                sid = opened.structured_content["sessionId"]
                async with events(alice) as stream:
                    listed = await stream.until("sessions", lambda d: d["sessions"])
                assert [s["id"] for s in listed["sessions"]] == [sid]
                # The other identity's overview does not list it.
                other = next(url for who, url in links.items() if who != TOKENS[TOKEN_A])
                async with events(other) as stream:
                    quiet = await stream.until("sessions")
                assert quiet["sessions"] == []


async def test_dsh_terminal_play_serves_a_recording_page_until_interrupted(tmp_path: Path) -> None:
    import json
    import signal
    import subprocess
    import sys

    cast = tmp_path / "pty-1-20261201T100000Z.cast"
    header = {"version": 2, "width": 80, "height": 24, "timestamp": 1764583200, "title": "pty-1"}
    events_ = [[0.1, "o", "hello from the cast\r\n"], [0.2, "m", "send: stdin_read exit=0"]]
    cast.write_text("\n".join(json.dumps(line) for line in [header, *events_]) + "\n")
    audit = tmp_path / "calls.jsonl"
    audit.write_text(
        json.dumps(
            {
                "ts": "2025-12-01T10:00:01.500Z",
                "agent": "a",
                "tool": "terminal_send",
                "sessionId": "pty-1",
                "args": {"text": "echo hi"},
                "outcome": {"isError": False},
                "durationMs": 5.0,
            }
        )
        + "\n"
    )
    with anyio.fail_after(BOUND_S):
        process = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "dsh_terminal_core.cli",
                "play",
                str(cast),
                "--audit",
                str(audit),
            ],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert process.stdout is not None
            printed = b""
            while b"\n" not in printed:
                printed += await process.stdout.receive()
            url = printed.decode().split("recording page: ", 1)[1].split()[0]
            page = await request("GET", url)
            assert page.status == 200 and b"pty-1" in page.body
            assert b'data-t="1.5"' in page.body  # the audit entry, 1.5 s into the recording
            cast_body = await request("GET", url + "/cast")
            assert b"hello from the cast" in cast_body.body
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
