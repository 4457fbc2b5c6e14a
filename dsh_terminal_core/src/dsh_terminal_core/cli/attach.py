"""``dsh-terminal attach URL``: a real terminal attached to a watch link, like ``tmux attach``.

The local terminal goes to raw mode; the session's view (from the link's event stream)
is redrawn whenever it changes; with a control link, ``Ctrl-]`` then ``c`` takes control
and from then on every key goes to the session, ``Ctrl-]`` then ``h`` hands back, and
``Ctrl-]`` then ``d`` detaches (handing back first). ``Ctrl-]`` twice sends one
``Ctrl-]``. The local terminal's modes are restored however this ends: detach, the link
ending, an error, or SIGTERM/SIGHUP/SIGINT.

Only ``http://`` links (the MCP HTTP server's or the loopback page server's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import termios
import tty
import urllib.parse
from typing import Any

__all__ = ["attach"]

PREFIX = b"\x1d"  # Ctrl-]
HELP = "Ctrl-] c takes control, Ctrl-] h hands back, Ctrl-] d detaches"


class _Link:
    def __init__(self, url: str) -> None:
        split = urllib.parse.urlsplit(url.rstrip("/"))
        if split.scheme != "http" or not split.hostname or "/watch/" not in split.path:
            raise ValueError(f"not a watch link: {url!r} (http://HOST:PORT/watch/TOKEN)")
        self.host = split.hostname
        self.port = split.port or 80
        self.path = split.path

    def head(self, method: str, path: str, body: bytes = b"", kind: str | None = None) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        if kind is not None:
            lines.append(f"Content-Type: {kind}")
        lines += [f"Content-Length: {len(body)}", "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def post(self, what: str, value: object) -> tuple[int, Any]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            body = json.dumps(value).encode()
            writer.write(self.head("POST", f"{self.path}/{what}", body, "application/json"))
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            await reader.readuntil(b"\r\n\r\n")
            data = await reader.read()
            return status, (json.loads(data) if data else None)
        finally:
            writer.close()


class _Screen:
    """Draws the session's view on the local terminal, and one status line under it."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.view: dict[str, Any] = {"text": ""}
        self.status = f"[attached: {HELP}]"

    def draw(self) -> None:
        size = shutil.get_terminal_size((80, 24))
        lines = self.view.get("text", "").split("\n")
        shown = [line[: size.columns] for line in lines[-(size.lines - 1) :]]
        frame = "\x1b[H\x1b[2J" + "\r\n".join(shown)
        frame += f"\x1b[{size.lines};1H\x1b[7m{self.status[: size.columns]}\x1b[0m"
        cursor = self.view.get("cursor")
        if isinstance(cursor, list) and len(cursor) == 2:
            frame += f"\x1b[{cursor[0] + 1};{cursor[1] + 1}H"
        else:
            frame += f"\x1b[{len(shown)};{len(shown[-1]) + 1 if shown else 1}H"
        self._out.write(frame.encode("utf-8", "replace"))
        self._out.flush()


async def _events(link: _Link, screen: _Screen, state: dict[str, str]) -> str:
    """Follow the event stream until it ends; the reason."""
    reader, writer = await asyncio.open_connection(link.host, link.port)
    try:
        writer.write(link.head("GET", f"{link.path}/events"))
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        if status != 200:
            return "the link is not valid (expired, closed, or never made)"
        await reader.readuntil(b"\r\n\r\n")
        name, data = "message", []
        while line := await reader.readline():
            text = line.decode("utf-8", "replace").rstrip("\n")
            if text.startswith(":"):
                continue
            if text:
                field, _, value = text.partition(": ")
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
                continue
            if not data:
                continue
            payload = json.loads("\n".join(data))
            name_, data = name, []
            name = "message"
            if name_ == "screen":
                screen.view = payload
            elif name_ == "state":
                state["control"] = payload["control"]
                mine = "you have control" if payload["control"] == "person" else "watching"
                screen.status = f"[{mine}: {HELP}]"
            elif name_ == "end":
                return f"the link ended: {payload.get('reason')}"
            screen.draw()
        return "the server closed the stream"
    finally:
        writer.close()


async def _run(url: str, fd: int, out: Any) -> str:
    link = _Link(url)
    screen = _Screen(out)
    state = {"control": "agent"}
    loop = asyncio.get_running_loop()
    keys: asyncio.Queue[bytes] = asyncio.Queue()
    loop.add_reader(fd, lambda: keys.put_nowait(os.read(fd, 1024)))
    following = asyncio.ensure_future(_events(link, screen, state))
    try:
        prefixed = False
        while True:
            getting = asyncio.ensure_future(keys.get())
            done, _ = await asyncio.wait({getting, following}, return_when=asyncio.FIRST_COMPLETED)
            if following in done:
                getting.cancel()
                return following.result()
            data = getting.result()
            if not data:
                return "stdin closed"
            typed = bytearray()
            for byte in data:
                if prefixed:
                    prefixed = False
                    command = chr(byte)
                    if command == "d":
                        if state["control"] == "person":
                            await link.post("control", {"action": "hand_back"})
                        return "detached"
                    if command == "c":
                        status, _ = await link.post("control", {"action": "take"})
                        if status == 403:
                            screen.status = f"[this link is read-only: {HELP}]"
                            screen.draw()
                    elif command == "h":
                        await link.post("control", {"action": "hand_back"})
                    elif byte == PREFIX[0]:
                        typed.append(byte)
                elif byte == PREFIX[0]:
                    prefixed = True
                else:
                    typed.append(byte)
            if typed and state["control"] == "person":
                await link.post("keys", {"data": typed.decode("utf-8", "replace")})
    finally:
        loop.remove_reader(fd)
        following.cancel()
        with contextlib.suppress(BaseException):
            await following


def attach(url: str) -> int:
    """Attach this terminal to the watch link ``url``; the exit code."""
    if not sys.stdin.isatty():
        print("dsh-terminal attach: stdin is not a terminal", file=sys.stderr)
        return 2
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    out = sys.stdout.buffer

    def restore(*_: object) -> None:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    def stop(signum: int, _frame: object) -> None:
        restore()
        out.write(b"\x1b[0m\r\n")
        out.flush()
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    reason = "error"
    try:
        tty.setraw(fd, termios.TCSANOW)
        reason = asyncio.run(_run(url, fd, out))
    except ValueError as exc:
        reason = str(exc)
    except (OSError, KeyboardInterrupt) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    finally:
        restore()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        out.write(b"\x1b[0m\r\n")
        out.flush()
    print(f"dsh-terminal attach: {reason}")
    return 0 if reason == "detached" or reason.startswith("the link ended") else 1
