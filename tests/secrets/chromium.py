"""A real headless chromium, driven over its DevTools pipe, that fills in a secret page.

``--remote-debugging-pipe`` speaks the DevTools protocol as NUL-terminated JSON on the
browser's fds 3 (commands in) and 4 (answers and events out), so no websocket client is
needed. The field is focused and typed into through ``Input.insertText`` and the form
is sent by clicking its button, as a person would.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BOUND_S = 60


class Chromium:
    """One headless browser process; close() ends its whole process group."""

    def __init__(self) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="secret-page-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def map_fds() -> None:
            # The browser reads its commands on fd 3 and writes on fd 4; lift both ends
            # above 4 first so neither overwrites the other.
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--no-default-browser-check",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=map_fds,
            start_new_session=True,
        )
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)  # type: ignore[no-any-return]

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        wanted = self._send(method, params, session)
        while True:
            message = self._receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event["method"] == method and event.get("sessionId") == session:
                return self.events.pop(index)
        while True:
            message = self._receive()
            if message.get("method") == method and message.get("sessionId") == session:
                return message
            if "method" in message:
                self.events.append(message)

    def fill_secret_page(self, url: str, secret: str) -> tuple[str, str]:
        """Open ``url``, type ``secret`` into its field, send the form; both pages' text."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        before = self.text(session)
        self.call(
            "Runtime.evaluate",
            {"expression": "document.getElementById('secret').focus()"},
            session=session,
        )
        self.call("Input.insertText", {"text": secret}, session=session)
        self.call(
            "Runtime.evaluate",
            {"expression": "document.getElementById('send').click()"},
            session=session,
        )
        self.wait_event("Page.loadEventFired", session)
        return before, self.text(session)

    def text(self, session: str) -> str:
        result = self.call(
            "Runtime.evaluate",
            {"expression": "document.body.innerText", "returnByValue": True},
            session=session,
        )
        return str(result["result"]["value"])

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            else:
                # Helpers of the browser share its process group; none may outlive it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            os.close(self._to_browser)
            os.close(self._from_browser)
            self._profile.cleanup()
