"""Security: ownership on every surface, scrubbed secrets, enforced confinement, the mode
fence, forged prompts and the session cap — all against real shells."""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest

from ..helpers import full_access
from ._support import BWRAP_USABLE

needs_bwrap = pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here")

SIGNALS = ["SIGINT", "SIGTERM", "SIGKILL", "SIGTSTP", "SIGHUP"]

# -- ownership --------------------------------------------------------------------------


async def test_guessed_ids_from_another_agent_get_foreign_session_and_never_data() -> None:
    secret = f"private-{secrets.token_hex(6)}"
    async with Harness(config=full_access()) as h:
        owner = h.create_agent("agent-1")
        intruder = h.create_agent("agent-1")  # the same id, another object: not the owner
        term = (await h.call_tool(owner, "terminal_open", {"type": "shell", "name": "work"})).value[
            "sessionId"
        ]
        await h.call_tool(owner, "terminal_send", {"sessionId": term, "text": f"echo {secret}"})
        via_tool = (await h.call_tool(owner, "pty_open", {"command": f"echo {secret}"})).value[
            "sessionId"
        ]
        via_facade = (
            await h.ctx.pty.open(owner, {"command": "cat", "env": {"MINE": secret}})
        ).session_id
        exited = (await h.call_tool(owner, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(
            owner, "terminal_send", {"sessionId": exited, "text": f"echo {secret}; exit 3"}
        )
        closed = (await h.call_tool(owner, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(owner, "terminal_close", {"sessionId": closed})
        owned = {term, via_tool, via_facade, exited}
        before = [(s.session_id, s.status) for s in h.ctx.terminals.list(owner)]

        outcomes: list[tuple[str, str, str]] = []  # (operation, id, code or "ok:<text>")

        async def attempt(op: str, sid: str, call: Callable[[], Any]) -> None:
            try:
                value = call()
                if inspect.isawaitable(value):
                    value = await value
            except TerminalError as exc:
                assert secret not in str(exc)
                outcomes.append((op, sid, exc.code))
                return
            text = getattr(value, "text", None)
            if isinstance(text, str) and text.startswith("error ["):
                assert secret not in text and getattr(value, "value", None) is None
                outcomes.append((op, sid, text[7 : text.index("]")]))
                return
            assert secret not in repr(value)
            outcomes.append((op, sid, f"ok:{getattr(value, 'value', value)!r}"))

        terminals, pty = h.ctx.terminals, h.ctx.pty

        def operations(sid: str) -> dict[str, Callable[[], Any]]:
            def tool(name: str, args: dict[str, Any]) -> Callable[[], Any]:
                return lambda: h.call_tool(intruder, name, args)

            hijack = SendRequest(text="echo hijack")
            ops: dict[str, Callable[[], Any]] = {
                "terminal_send": tool("terminal_send", {"sessionId": sid, "text": "echo hijack"}),
                "terminal_send raw": tool(
                    "terminal_send", {"sessionId": sid, "text": "x", "submit": False}
                ),
                "terminal_send bg": tool(
                    "terminal_send",
                    {"sessionId": sid, "text": "echo hijack", "run_in_background": True},
                ),
                "terminal_read": tool(
                    "terminal_read", {"sessionId": sid, "offset": 1, "count": 10_000}
                ),
                "terminal_close": tool("terminal_close", {"sessionId": sid}),
                "pty_send": tool("pty_send", {"id": sid, "data": "echo hijack"}),
                "pty_tail": tool("pty_tail", {"id": sid}),
                "pty_close": tool("pty_close", {"id": sid}),
                "ctx.pty.send": lambda: pty.send(intruder, sid, {"data": "echo hijack"}),
                "ctx.pty.tail": lambda: pty.tail(intruder, sid),
                "ctx.pty.close": lambda: pty.close(intruder, sid),
                "ctx.terminals.start_send": lambda: terminals.start_send(intruder, sid, hijack),
                "ctx.terminals.read": lambda: terminals.read(intruder, sid, ReadRequest()),
                "ctx.terminals.kill": lambda: terminals.kill(intruder, sid, "hijack"),
                "ctx.terminals.get_session": lambda: terminals.get_session(intruder, sid),
                "ctx.terminals.session_type": lambda: terminals.session_type(intruder, sid),
            }
            for sig in SIGNALS:
                args = {"sessionId": sid, "signal": sig}
                ops[f"terminal_signal {sig}"] = tool("terminal_signal", args)
                ops[f"ctx.terminals.signal {sig}"] = partial(terminals.signal, intruder, sid, sig)
            return ops

        for n in range(1, 21):
            sid = f"pty-{n}"
            for op, call in operations(sid).items():
                await attempt(op, sid, call)

        for op, sid, code in outcomes:
            if sid in owned:
                assert code == "FOREIGN_SESSION", (op, sid, code)
            elif op in ("pty_close", "ctx.pty.close"):
                assert code in ("ok:{'closed': False}", "ok:False"), (op, sid, code)  # idempotent
            else:
                assert code == "NO_SESSION", (op, sid, code)
        assert len(outcomes) == 20 * 26

        # Nothing was created, moved or touched on the intruder's side or the owner's.
        assert (await h.call_tool(intruder, "terminal_list", {})).value == {"sessions": []}
        assert pty.opened_sessions(intruder) == [] and h.ctx.jobs.list(intruder) == []
        assert [(s.session_id, s.status) for s in terminals.list(owner)] == before
        for sid in owned:
            page = terminals.read(owner, sid, ReadRequest(offset=1, count=10_000)).text
            assert "hijack" not in page
        first_tail = await h.call_tool(owner, "pty_tail", {"id": via_tool})
        assert secret in first_tail.value["text"]  # the intruder's tails never moved the cursor
        still = await h.call_tool(owner, "terminal_send", {"sessionId": term, "text": "echo mine"})
        assert still.value["viewport"] == "mine\n"


# -- secrets ------------------------------------------------------------------------------

SECRET_NAMES = [
    "FOO_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "API_KEY",
    "my_secret",
    "Github_Token",
    "PGPASSWORD",
    "DSH_HOST_ONLY",
]


@pytest.mark.parametrize(
    "mode", ["danger-full-access", pytest.param("workspace-write", marks=needs_bwrap)]
)
async def test_secrets_never_reach_the_shell_or_its_children(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mode: str
) -> None:
    values = {name: f"v{secrets.token_hex(8)}" for name in SECRET_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RELIABILITY_CANARY", "visible")
    config = {"sandbox-policy": {"mode": mode, "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        shell_pid = h.ctx.terminals.get_session(agent, sid).shell_pid
        seen = []
        for command in (
            "env",
            "set",  # shell variables too, not only the exported ones
            "python3 -c 'import os; print(sorted(os.environ.items()))'",
            "cat /proc/$$/environ | tr '\\0' '\\n'",
        ):
            result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": command})
            assert result.value["waitReason"] == "stdin_read"
            seen.append(result.value["viewport"])
        opened = await h.call_tool(agent, "pty_open", {"command": "env"})
        seen.append(opened.value["initialOutput"])
        with open(f"/proc/{shell_pid}/environ", "rb") as handle:
            seen.append(handle.read().decode(errors="replace").replace("\0", "\n"))
        for text in seen:
            for name, value in values.items():
                assert value not in text, (name, text[:200])
                assert f"\n{name}=" not in f"\n{text}"
        assert "RELIABILITY_CANARY=visible" in seen[0]  # the rest of the environment passes


# -- confinement from inside a live session -----------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_bwrap_confinement_holds_from_inside_a_live_shell(tmp_path: Path, mode: str) -> None:
    nonce = secrets.token_hex(6)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="dsh-outside-"))
    (workspace / "escape").symlink_to(outside)
    home = Path(os.path.expanduser("~"))
    denied_paths = [Path(f"/usr/dsh-probe-{nonce}"), Path(f"/etc/dsh-probe-{nonce}")]
    # A HOME under /tmp or the workspace is writable; any other takes new files into the
    # owner's home store (SPEC §32.3), and keeps the user's own files read-only.
    home_layered = not any(home.is_relative_to(p) for p in (Path("/tmp"), workspace))
    users_file = home / f".dsh-users-{nonce}"
    users_file.write_text("the user's\n")
    host_paths = [
        home / f".dsh-probe-{nonce}",
        users_file,
        Path(f"/usr/dsh-probe-{nonce}"),
        Path(f"/etc/dsh-probe-{nonce}"),
        Path(f"/tmp/dsh-probe-{nonce}"),
        workspace / "inside.txt",
        outside / "through-link.txt",
    ]
    config = {"sandbox-policy": {"mode": mode, "workspace_root": str(workspace)}}
    try:
        async with Harness(config=config) as h:
            agent = h.create_agent("a")
            sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]

            async def run(command: str) -> dict[str, Any]:
                result = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": command}
                )
                assert result.value["waitReason"] == "stdin_read", result.text
                return result.value  # type: ignore[no-any-return]

            assert (await run("pwd"))["viewport"] == f"{workspace}\n"
            for target in denied_paths:
                denied = await run(f"touch {target}")
                assert denied["exitCode"] != 0 and "Read-only file system" in denied["viewport"], (
                    target
                )
            if home_layered:
                kept = await run(f"echo x >> {users_file}")
                assert kept["exitCode"] != 0 and "Read-only file system" in kept["viewport"]
                stored = await run(f"touch ~/.dsh-probe-{nonce} && ls ~/.dsh-probe-{nonce}")
                assert stored["exitCode"] == 0, stored
            # Root inside the sandbox has no capabilities left: no remounting its way out.
            remount = await run("mount -o remount,rw /usr 2>&1; touch /usr/dsh-probe-" + nonce)
            assert remount["exitCode"] != 0
            linked = await run("echo x > escape/through-link.txt")
            assert linked["exitCode"] != 0
            tmp_write = await run(f"echo x > /tmp/dsh-probe-{nonce} && cat /tmp/dsh-probe-{nonce}")
            assert (tmp_write["exitCode"], tmp_write["viewport"]) == (0, "x\n")
            workspace_write = await run("echo ok > inside.txt")
            if mode == "read-only":
                assert workspace_write["exitCode"] != 0
            else:
                assert workspace_write["exitCode"] == 0
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})

        for path in denied_paths:
            assert not path.exists(), path
        assert not (home / f".dsh-probe-{nonce}").exists()  # the owner's store had it
        assert users_file.read_text() == "the user's\n"
        assert not (outside / "through-link.txt").exists()
        # Both modes: the owner's private /tmp, never the host's.
        assert not Path(f"/tmp/dsh-probe-{nonce}").exists()
        assert (workspace / "inside.txt").exists() is (mode == "workspace-write")
    finally:
        for path in host_paths:
            if path.is_file():
                path.unlink()
        shutil.rmtree(outside, ignore_errors=True)


# -- the sandbox-mode fence -----------------------------------------------------------------


async def test_mode_fence_covers_spawns_in_flight_pty_sessions_and_exited_shells() -> None:
    async with Harness(config=full_access()) as h:
        policy = h.ctx.sandbox_policy
        agent, other = h.create_agent("a"), h.create_agent("b")

        def locked() -> bool:
            try:
                policy.set_mode(agent, "read-only")
            except TerminalError as exc:
                assert exc.code == "SANDBOX_MODE_LOCKED" and "close them first" in str(exc)
                return True
            return False

        opening = asyncio.ensure_future(h.call_tool(agent, "terminal_open", {"type": "shell"}))
        for _ in range(3):  # let the spawn run to its first wait for the shell
            await asyncio.sleep(0)
        assert h.ctx.terminals.has_owner_activity(agent) and not opening.done()
        assert locked(), "a spawn in flight must hold the fence"
        term = (await opening).value["sessionId"]
        assert locked()
        policy.set_mode(agent, "danger-full-access")  # re-asserting the current mode is fine
        assert policy.set_mode(other, "read-only").mode == "read-only"  # per owner

        await h.call_tool(agent, "terminal_close", {"sessionId": term})
        pty = (await h.call_tool(agent, "pty_open", {"command": "true"})).value["sessionId"]
        assert locked(), "a pty_open session holds the fence too"
        await h.call_tool(agent, "pty_send", {"id": pty, "data": "exit 0"})
        [snapshot] = h.ctx.terminals.list(agent)
        assert snapshot.status.kind == "exited"
        assert locked(), "an exited session holds the fence until it is closed"
        assert (await h.call_tool(agent, "pty_close", {"id": pty})).value == {"closed": True}
        assert policy.set_mode(agent, "read-only").mode == "read-only"


# -- forged prompts -----------------------------------------------------------------------

MARKER = r"printf '\033]133;D;0\007dsh> '"
REAL = "echo real-end; false"
FORGED = {
    "printf builtin": f"{MARKER}; sleep 3; {REAL}",
    "external printf": f"/usr/bin/{MARKER}; sleep 3; {REAL}",
    "split marker": rf"printf '\033]13'; printf '3;D;0\007'; printf 'dsh> '; sleep 3; {REAL}",
    "ST terminator": rf"printf '\033]133;D;0\033\\dsh> '; sleep 3; {REAL}",
    "background job": f"(sleep 0.3; {MARKER}) & sleep 3; {REAL}",
    "repeated": f"for i in $(seq 30); do {MARKER}; sleep 0.1; done; {REAL}",
}


async def test_forged_prompt_markers_cannot_settle_a_send_early() -> None:
    """Production timing defaults: a settle before the command's 3 s is over would be the
    forged prompt; the real one carries the real exit code (1)."""
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")

        async def forge(command: str, via_pty: bool) -> tuple[float, str, str | None, int | None]:
            started = time.monotonic()
            if via_pty:
                opened = (await h.call_tool(agent, "pty_open", {"command": "true"})).value[
                    "sessionId"
                ]
                started = time.monotonic()
                result = await h.call_tool(agent, "pty_send", {"id": opened, "data": command})
                return time.monotonic() - started, result.value["delta"], None, None
            sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
            started = time.monotonic()
            result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": command})
            value = result.value
            return (
                time.monotonic() - started,
                value["viewport"],
                value["waitReason"],
                value["exitCode"],
            )

        cases = [(name, command, False) for name, command in FORGED.items()]
        cases.append(("pty_send", FORGED["printf builtin"], True))
        results = await asyncio.gather(*(forge(command, via_pty) for _, command, via_pty in cases))
        print(f"\nFIGURE forged prompts: earliest settle {min(r[0] for r in results):.3f}s")
        for (name, _, via_pty), (elapsed, viewport, reason, exit_code) in zip(
            cases, results, strict=True
        ):
            assert elapsed >= 2.9, f"{name}: settled after {elapsed:.3f}s on a forged prompt"
            assert "real-end" in viewport, name
            if not via_pty:
                assert (reason, exit_code) == ("stdin_read", 1), name


# -- the per-owner session cap --------------------------------------------------------------


async def test_session_limit_counts_both_tool_families_and_recovers_after_a_close() -> None:
    async with Harness(config=full_access()) as h:
        limit = h.ctx.terminals.max_sessions_per_owner
        assert limit == 16
        agent, other = h.create_agent("a"), h.create_agent("b")
        opens = [h.call_tool(agent, "terminal_open", {"type": "shell"}) for _ in range(limit - 4)]
        opens += [h.call_tool(agent, "pty_open", {"command": "true"}) for _ in range(5)]
        results = await asyncio.gather(*opens)  # 17 at once: spawns in flight count
        refused = [(n, r) for n, r in enumerate(results) if r.is_error]
        assert len(refused) == 1 and refused[0][1].text.startswith("error [SESSION_LIMIT]")
        # Each family advises its own close tool.
        by_pty = refused[0][0] >= limit - 4
        assert ("pty_close" if by_pty else "terminal_close") in refused[0][1].text
        assert len(h.ctx.terminals.list(agent)) == limit
        assert not (await h.call_tool(other, "terminal_open", {"type": "shell"})).is_error

        again = await h.call_tool(agent, "pty_open", {"command": "true"})
        assert again.text.startswith("error [SESSION_LIMIT]")
        victim = h.ctx.terminals.list(agent)[0].session_id
        assert (await h.call_tool(agent, "terminal_close", {"sessionId": victim})).value == {
            "closed": True
        }
        reopened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        assert not reopened.is_error
        works = await h.call_tool(
            agent, "terminal_send", {"sessionId": reopened.value["sessionId"], "text": "echo ok"}
        )
        assert works.value["viewport"] == "ok\n"
        assert (await h.call_tool(agent, "terminal_open", {"type": "shell"})).text.startswith(
            "error [SESSION_LIMIT]"
        )
