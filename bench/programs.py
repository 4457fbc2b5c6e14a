"""Real programs through the model-facing tools, with production timings.

    python3 bench/programs.py                      # every program, one table
    python3 bench/programs.py --only top-1 --only man
    python3 bench/programs.py --json /tmp/programs.json

Why it exists: SPEC §19 names programs that settle badly today — periodic refreshers
(`top -d 1`, `top -d 0.5`, `htop`) run out the send's whole budget, `man ls` reaches
the model as `NNAAMMEE`, `python3 -m http.server` settles only by silence after seconds,
and a send cannot wait for a line such as `Listening on`. This battery measures exactly
those cases the way a model meets them — `terminal_open` / `terminal_send` through
`Harness.call_tool`, no timing overrides, one fresh session per program, each send given
`timeoutMs` 15000 — so the same script gives the numbers before and after a change.

For each program it prints the session kind (line or screen), the wait reason, the wall
time of the `terminal_send` call, `exitCode`, and the first 60 characters of what the
model sees (the viewport, or the screen's text when a screen session returns one; for
`man ls` the excerpt starts at the NAME heading, however it is spelled), plus the
`listening` field when a result carries one and the error of a refused send. Each
program is then quit as a person would (`q` for top and htop, `terminal_signal SIGINT`
for servers) and its session closed.

The battery runs in a worker process. After the worker has closed its sessions, disposed
its agent and closed its harness it lists its own descendants (only the fork server may
remain, and it dies with the worker); once the worker has exited, this process checks
that no process the run saw — shells, their programs, the fork server and the host-death
guardian — is still alive, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

TIMEOUT_MS = 15_000
EXCERPT_CHARS = 60
OWNER = "bench-programs"
WAITFOR_COMMAND = (
    "python3 -u -c \"import time; time.sleep(0.5); print('Listening on 1234'); time.sleep(30)\""
)
# How `man ls` spells its first heading to the model: as a terminal shows it, as
# backspace overstrike with the backspaces dropped, or with them kept.
MAN_HEADINGS = ("N\bNA\bAM\bME\bE", "NNAAMMEE", "NAME")

Quit = Literal["keys", "signal", "none"]


@dataclass(frozen=True)
class Program:
    """One row of the battery: how to start the program and how to leave it."""

    key: str  # the name --only takes
    label: str  # what the table prints
    screen: bool
    send: Mapping[str, Any]  # terminal_send arguments besides sessionId and timeoutMs
    quit: Quit
    needs: str | None = None  # an executable that must exist, else the row is skipped


_HTOPRC = "/tmp/dsh-bench-htoprc"

PROGRAMS: tuple[Program, ...] = (
    Program("top-1", "top -d 1", True, {"text": "top -d 1"}, "keys", "top"),
    Program("top-0.5", "top -d 0.5", True, {"text": "top -d 0.5"}, "keys", "top"),
    # htop saves its settings as it quits: HTOPRC keeps them out of the home directory.
    Program("htop", "htop", True, {"text": f"HTOPRC={_HTOPRC} htop"}, "keys", "htop"),
    Program("htop-0.5", "htop -d 5", True, {"text": f"HTOPRC={_HTOPRC} htop -d 5"}, "keys", "htop"),
    Program("man", "man ls", False, {"text": "man ls"}, "none", "man"),
    Program(
        "http.server",
        "python3 -m http.server 0",
        False,
        {"text": "python3 -m http.server 0 --bind 127.0.0.1"},
        "signal",
    ),
    Program(
        "waitFor",
        "waitFor 'Listening on'",
        False,
        {"text": WAITFOR_COMMAND, "waitFor": "Listening on"},
        "signal",
    ),
)
BY_KEY = {program.key: program for program in PROGRAMS}


@dataclass
class Row:
    """What one program's send came back with (JSON-ready)."""

    key: str
    program: str
    session: Literal["line", "screen"]
    skipped: str | None = None
    wait_reason: str | None = None
    settle_ms: float | None = None
    exit_code: int | None = None
    excerpt: str | None = None
    excerpt_from: Literal["viewport", "screen", "error"] | None = None
    heading: str | None = None  # man only: which spelling of NAME the viewport carries
    listening: Any = None
    error: str | None = None
    quit: str | None = None  # how the program was left, and what that send said
    children_after_quit: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Seen:
    """A process the run saw, told apart from a later one with the same pid."""

    pid: int
    created: float
    what: str


def _config(sandbox: str, workspace: str) -> dict[str, Any]:
    """Production timings: only the sandbox is chosen (unconfined, as the other benches)."""
    return {"sandbox-policy": {"mode": sandbox, "workspace_root": workspace}}


def _excerpt(row: Row, value: Mapping[str, Any]) -> None:
    viewport = str(value.get("viewport") or "")
    screen = value.get("screen")
    if viewport or not isinstance(screen, Mapping):
        text, row.excerpt_from = viewport, "viewport"
    else:
        text, row.excerpt_from = str(screen.get("text", "")), "screen"
    start = 0
    if row.key == "man":
        found = [(text.find(h), h) for h in MAN_HEADINGS if h in text]
        if found:
            start, row.heading = min(found)
        else:
            row.heading = "absent from the viewport"
    row.excerpt = text[start : start + EXCERPT_CHARS]


def _describe(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{proc.pid} {' '.join(proc.cmdline())[:80]}"
    return str(proc.pid)


def _record(seen: dict[int, Seen], pid: int, what: str) -> None:
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        seen.setdefault(pid, Seen(pid, proc.create_time(), what))
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                seen.setdefault(child.pid, Seen(child.pid, child.create_time(), _describe(child)))


def _alive(entry: Seen) -> bool:
    try:
        proc = psutil.Process(entry.pid)
        return proc.create_time() == entry.created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def _run_program(h: Any, agent: Any, program: Program, seen: dict[int, Seen]) -> Row:
    row = Row(program.key, program.label, "screen" if program.screen else "line")
    opened = await h.call_tool(
        agent, "terminal_open", {"screen": True, "rows": 24, "cols": 80} if program.screen else {}
    )
    if opened.is_error:
        row.error = f"terminal_open: {opened.text}"
        return row
    sid = str(opened.value["sessionId"])
    shell_pid = int(opened.value["pid"])
    _record(seen, shell_pid, f"shell of {program.label}")
    try:
        args = {"sessionId": sid, **program.send, "timeoutMs": TIMEOUT_MS}
        start = time.perf_counter()
        result = await h.call_tool(agent, "terminal_send", args)
        row.settle_ms = (time.perf_counter() - start) * 1000
        _record(seen, shell_pid, f"shell of {program.label}")
        if result.is_error:
            row.wait_reason = "error"
            row.error = str(result.text)
            row.excerpt, row.excerpt_from = str(result.text)[:EXCERPT_CHARS], "error"
            return row  # nothing was typed: nothing to quit
        value: Mapping[str, Any] = result.value
        row.wait_reason = str(value.get("waitReason"))
        row.exit_code = value.get("exitCode")
        row.listening = value.get("listening")
        _excerpt(row, value)
        row.quit = await _quit(h, agent, sid, program.quit)
        with contextlib.suppress(psutil.Error):
            row.children_after_quit = [
                _describe(c) for c in psutil.Process(shell_pid).children(recursive=True)
            ]
        return row
    finally:
        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        if closed.is_error:
            row.error = f"{row.error or ''} terminal_close: {closed.text}".strip()


async def _quit(h: Any, agent: Any, sid: str, how: Quit) -> str:
    if how == "none":
        return "none needed"
    if how == "keys":
        step = "keys q"
        result = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "keys": ["q"], "timeoutMs": TIMEOUT_MS}
        )
    else:
        signalled = await h.call_tool(
            agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"}
        )
        if signalled.is_error:
            return f"terminal_signal SIGINT: {signalled.text}"
        step = "SIGINT, then a wait"
        result = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "", "submit": False, "timeoutMs": TIMEOUT_MS},
        )
    if result.is_error:
        return f"{step}: {result.text}"
    return f"{step}: {result.value.get('waitReason')} exitCode={result.value.get('exitCode')}"


def _infrastructure() -> list[tuple[int, str]]:
    """The fork server and the host-death guardian of this process, where they run."""
    found: list[tuple[int, str]] = []
    with contextlib.suppress(Exception):
        from dsh_terminal_core.provider import forkclient

        pid = forkclient.fork_server().pid
        if pid is not None:
            found.append((pid, "fork server"))
    with contextlib.suppress(Exception):
        from dsh_terminal_core.provider import hostguard

        fd = getattr(hostguard, "_write_fd", None)
        if fd is not None:
            target = f"pipe:[{os.fstat(fd).st_ino}]"
            for proc in psutil.process_iter():
                with contextlib.suppress(psutil.Error, OSError):
                    if proc.pid != os.getpid() and os.readlink(f"/proc/{proc.pid}/fd/0") == target:
                        found.append((proc.pid, "host-death guardian"))
    return found


async def _worker(keys: Sequence[str], sandbox: str) -> dict[str, Any]:
    from dsh_terminal_core.kernel.harness import Harness

    seen: dict[int, Seen] = {}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-programs-") as workspace:
        h = Harness(config=_config(sandbox, workspace))
        await h.start()
        try:
            agent = h.create_agent(OWNER)
            try:
                for key in keys:
                    program = BY_KEY[key]
                    if program.needs is not None and shutil.which(program.needs) is None:
                        rows.append(
                            Row(
                                key,
                                program.label,
                                "screen" if program.screen else "line",
                                skipped=f"{program.needs} not installed",
                            )
                        )
                        continue
                    rows.append(await _run_program(h, agent, program, seen))
            finally:
                await agent.dispose()
        finally:
            await h.aclose()
        infrastructure = _infrastructure()
        for pid, what in infrastructure:
            _record(seen, pid, what)
        allowed = {pid for pid, _ in infrastructure}
        descendants = [
            _describe(p) for p in psutil.Process().children(recursive=True) if p.pid not in allowed
        ]
    modules = {
        name: str(getattr(sys.modules[name], "__file__", None))
        for name in sorted(sys.modules)
        if name.startswith("dsh_") and "." not in name
    }
    return {
        "rows": [asdict(row) for row in rows],
        "seen": [asdict(entry) for entry in seen.values()],
        "descendants_after_close": descendants,
        "infrastructure": [{"pid": pid, "what": what} for pid, what in infrastructure],
        "modules": modules,
    }


def _leftovers(seen: Sequence[Seen], wait_s: float = 5.0) -> list[str]:
    """What the run saw that is still alive once the worker is gone (after a grace)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = [entry for entry in seen if _alive(entry)]
        if not alive or time.monotonic() >= deadline:
            return [f"{entry.pid} ({entry.what})" for entry in alive]
        time.sleep(0.05)


def _cell(value: Any, width: int) -> str:
    text = "-" if value is None else str(value)
    return text.ljust(width)


def _print(report: Mapping[str, Any]) -> None:
    header = ("program", "session", "wait reason", "settle ms", "exitCode", "excerpt (repr)")
    widths = (26, 8, 13, 10, 9)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)) + header[-1])
    for row in report["rows"]:
        if row["skipped"]:
            print(
                f"{_cell(row['program'], 26)}  {_cell(row['session'], 8)}  "
                f"skipped: {row['skipped']}"
            )
            continue
        settle = None if row["settle_ms"] is None else f"{row['settle_ms']:.0f}"
        excerpt = None if row["excerpt"] is None else repr(row["excerpt"])
        if row["excerpt_from"] == "screen":
            excerpt = f"[screen] {excerpt}"
        cells = (row["program"], row["session"], row["wait_reason"], settle, row["exit_code"])
        line = "  ".join(_cell(c, w) for c, w in zip(cells, widths, strict=True))
        print(line + ("-" if excerpt is None else excerpt))
    print()
    for row in report["rows"]:
        if row["skipped"]:
            continue
        notes = []
        if row["heading"] is not None:
            notes.append(f"NAME heading: {row['heading']!r}")
        if row["key"] == "http.server" or row["listening"] is not None:
            listening = "(no listening field)" if row["listening"] is None else row["listening"]
            notes.append(f"listening: {listening}")
        if row["error"]:
            notes.append(f"error: {row['error']}")
        if row["quit"]:
            notes.append(f"quit: {row['quit']}")
        if row["children_after_quit"]:
            notes.append(f"still running after quit: {row['children_after_quit']}")
        print(f"{row['program']}: " + "; ".join(notes))
    print()
    modules = ", ".join(f"{name}={path}" for name, path in report["modules"].items())
    print(f"modules: {modules}")
    after_close = report["descendants_after_close"]
    infra = ", ".join(f"{i['what']} {i['pid']}" for i in report["infrastructure"]) or "none"
    print(
        "after closing the harness: "
        + ("no descendant but " + infra if not after_close else f"descendants {after_close}")
    )
    left = report["leftovers_after_exit"]
    checked = len(report["seen"])
    print(
        f"after the worker exited: {checked} processes the run saw checked, "
        + ("none left behind" if not left else f"STILL ALIVE: {left}")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--only", action="append", choices=list(BY_KEY), help="run this program only (repeatable)"
    )
    parser.add_argument(
        "--sandbox",
        default="danger-full-access",
        choices=["danger-full-access", "workspace-write", "read-only"],
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    keys: list[str] = args.only or list(BY_KEY)

    if args.worker is not None:
        args.worker.write_text(json.dumps(asyncio.run(_worker(keys, args.sandbox))))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-programs-") as tmp:
        out = Path(tmp) / "worker.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out)]
        command += ["--sandbox", args.sandbox]
        for key in keys:
            command += ["--only", key]
        done = subprocess.run(command, check=False)
        if done.returncode != 0 or not out.exists():
            print(f"worker failed with exit status {done.returncode}", file=sys.stderr)
            return 1
        report: dict[str, Any] = json.loads(out.read_text())
    seen = [Seen(**entry) for entry in report["seen"]]
    report["leftovers_after_exit"] = _leftovers(seen)
    report["command"] = " ".join(sys.argv)
    report["python"] = sys.executable
    _print(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    clean = not report["leftovers_after_exit"] and not report["descendants_after_close"]
    return 0 if clean else 2


if __name__ == "__main__":
    raise SystemExit(main())
