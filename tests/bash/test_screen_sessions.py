"""Screen sessions, named keys and resize with real full-screen programs, through the tools.

Production timing defaults throughout: the programs below never print the prompt marker,
so every wait reason here comes from the exact stdin-wait tier, as it does for a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import call_value as _call
from ..helpers import full_access
from ..helpers import needs as _needs


async def _open_screen(h: Harness, agent: Agent, **extra: Any) -> str:
    value = await _call(h, agent, "terminal_open", {"screen": True, **extra})
    return str(value["sessionId"])


def _screen_text(value: dict[str, Any]) -> str:
    assert "screen" in value, value
    return str(value["screen"]["text"])


@_needs("vim")
async def test_vim_edits_and_saves_a_file_driven_by_keys(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("first line\n")
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open_screen(h, agent)
        opened = await _call(
            h, agent, "terminal_send", {"sessionId": sid, "text": f"vim -u NONE -N {target}"}
        )
        assert opened["waitReason"] == "stdin_read"
        assert opened["screen"]["alternate"] is True
        assert "first line" in _screen_text(opened)
        typed = await _call(
            h,
            agent,
            "terminal_send",
            {"sessionId": sid, "keys": ["G", "o", "added by keys", "Escape"]},
        )
        assert typed["waitReason"] == "stdin_read"
        assert "added by keys" in _screen_text(typed)
        quit_ = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": [":wq", "Enter"]})
        assert quit_["waitReason"] == "stdin_read"
        assert quit_["exitCode"] == 0
        assert target.read_text() == "first line\nadded by keys\n"
        after = await _call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo done-$?"})
        assert after["waitReason"] == "stdin_read"
        assert after["exitCode"] == 0
        assert "done-0" in (after.get("screen") or {}).get("text", after["viewport"])


@_needs("vim")
async def test_leaving_vim_restores_the_primary_screen(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open_screen(h, agent)
        await _call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo primary-marker"})
        inside = await _call(
            h, agent, "terminal_send", {"sessionId": sid, "text": "vim -u NONE -N scratch"}
        )
        assert inside["screen"]["alternate"] is True
        assert "primary-marker" not in _screen_text(inside)
        left = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": [":q!", "Enter"]})
        assert left["waitReason"] == "stdin_read"
        read = await _call(h, agent, "terminal_read", {"sessionId": sid, "screen": True})
        assert read["screen"]["alternate"] is False
        assert "primary-marker" in read["screen"]["text"]
        assert (read["rows"], read["cols"]) == (40, 160)


@_needs("less")
async def test_less_pages_with_space_and_pagedown_and_quits_with_q(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"row {i:04d}\n" for i in range(1, 301)))
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open_screen(h, agent, rows=20, cols=80)
        first = await _call(h, agent, "terminal_send", {"sessionId": sid, "text": "less long.txt"})
        assert first["waitReason"] == "stdin_read"
        page1 = _screen_text(first)
        assert "row 0001" in page1 and "row 0019" in page1 and "row 0020" not in page1
        assert "not fully functional" not in page1
        second = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["Space"]})
        assert "row 0020" in _screen_text(second) and "row 0001" not in _screen_text(second)
        third = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["PageDown"]})
        assert "row 0039" in _screen_text(third)
        quit_ = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["q"]})
        assert quit_["waitReason"] == "stdin_read"
        assert quit_["exitCode"] == 0


@_needs("top")
async def test_top_shows_its_header(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open_screen(h, agent)
        shown = await _call(h, agent, "terminal_send", {"sessionId": sid, "text": "top"})
        assert shown["waitReason"] == "stdin_read"
        text = _screen_text(shown)
        assert "load average" in text and "PID" in text
        quit_ = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["q"]})
        assert quit_["waitReason"] == "stdin_read"
        assert quit_["exitCode"] == 0


@_needs("dialog")
async def test_a_dialog_menu_is_driven_with_down_and_enter(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open_screen(h, agent, rows=24, cols=80)
        menu = await _call(
            h,
            agent,
            "terminal_send",
            {
                "sessionId": sid,
                "text": "dialog --menu 'Pick one' 12 40 3 apple A banana B cherry C 2>choice.txt",
            },
        )
        assert menu["waitReason"] == "stdin_read"
        assert "Pick one" in _screen_text(menu) and "banana" in _screen_text(menu)
        chosen = await _call(
            h, agent, "terminal_send", {"sessionId": sid, "keys": ["Down", "Down", "Enter"]}
        )
        assert chosen["waitReason"] == "stdin_read"
        assert chosen["exitCode"] == 0
        assert (tmp_path / "choice.txt").read_text() == "cherry"


async def test_resize_is_seen_by_the_program_in_both_modes(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        for screen in (False, True):
            sid = (await _call(h, agent, "terminal_open", {"screen": screen}))["sessionId"]
            resized = await _call(
                h, agent, "terminal_resize", {"sessionId": sid, "rows": 33, "cols": 101}
            )
            assert resized == {"rows": 33, "cols": 101}
            shown = await _call(
                h, agent, "terminal_send", {"sessionId": sid, "text": "stty size; tput cols"}
            )
            text = _screen_text(shown) if "screen" in shown else shown["viewport"]
            assert "33 101" in text and "\n101" in text
            if screen:
                read = await _call(h, agent, "terminal_read", {"sessionId": sid, "screen": True})
                assert (read["rows"], read["cols"]) == (33, 101)


_REPORT_KEY = (
    "python3 -c \"import os,sys,tty; sys.stdout.write('\\033[?1h'); sys.stdout.flush(); "
    "tty.setcbreak(0); print('got', os.read(0, 8).hex()); sys.stdout.write('\\033[?1l')\""
)


async def test_up_arrives_as_ss3_once_a_program_enables_application_cursor_keys(
    tmp_path: Path,
) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        for screen in (False, True):
            sid = (await _call(h, agent, "terminal_open", {"screen": screen}))["sessionId"]
            waiting = await _call(
                h, agent, "terminal_send", {"sessionId": sid, "text": _REPORT_KEY}
            )
            assert waiting["waitReason"] == "stdin_read"
            pressed = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["Up"]})
            assert pressed["waitReason"] == "stdin_read"
            assert pressed["exitCode"] == 0
            text = _screen_text(pressed) if "screen" in pressed else pressed["viewport"]
            assert "got 1b4f41" in text  # ESC O A
            # Mode off again: the next Up is ESC [ A.
            await _call(h, agent, "terminal_send", {"sessionId": sid, "text": _REPORT_KEY})
            again = await _call(h, agent, "terminal_send", {"sessionId": sid, "keys": ["Up"]})
            text = _screen_text(again) if "screen" in again else again["viewport"]
            assert "got 1b4f41" in text  # the program enables DECCKM itself each time


async def test_a_line_mode_program_on_the_alternate_screen_is_reported(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = (await _call(h, agent, "terminal_open", {}))["sessionId"]
        entered = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "printf '\\033[?1049h'"}
        )
        assert entered.value["waitReason"] == "stdin_read"
        assert entered.value["alternateScreen"] is True
        assert "screen=true" in entered.text
        left = await _call(
            h, agent, "terminal_send", {"sessionId": sid, "text": "printf '\\033[?1049l'"}
        )
        assert "alternateScreen" not in left
        with_screen = await h.call_tool(agent, "terminal_read", {"sessionId": sid, "screen": True})
        assert with_screen.is_error and "INVALID_ARGUMENT" in with_screen.text


async def test_a_misspelled_key_types_nothing(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = (await _call(h, agent, "terminal_open", {}))["sessionId"]
        bad = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "keys": ["echo typed", "PageDwn", "Enter"]}
        )
        assert bad.is_error and bad.text.startswith("error [INVALID_ARGUMENT]")
        both = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "x", "keys": ["Enter"]}
        )
        assert both.is_error and both.text.startswith("error [INVALID_ARGUMENT]")
        shown = await _call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo clean"})
        assert shown["viewport"].strip() == "clean"
        assert "typed" not in shown["viewport"]
        keyed = await _call(
            h, agent, "terminal_send", {"sessionId": sid, "keys": ["echo via-keys", "Enter"]}
        )
        assert keyed["waitReason"] == "stdin_read" and keyed["exitCode"] == 0
        assert "via-keys" in keyed["viewport"]


async def test_resize_refuses_sizes_outside_the_limits(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = (await _call(h, agent, "terminal_open", {}))["sessionId"]
        for rows, cols in ((1, 80), (24, 5), (5000, 80)):
            refused = await h.call_tool(
                agent, "terminal_resize", {"sessionId": sid, "rows": rows, "cols": cols}
            )
            assert refused.is_error and "INVALID_ARGUMENT" in refused.text
        other = h.create_agent("b")
        foreign = await h.call_tool(
            other, "terminal_resize", {"sessionId": sid, "rows": 30, "cols": 90}
        )
        assert foreign.is_error and "FOREIGN_SESSION" in foreign.text
