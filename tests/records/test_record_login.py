"""The login shell run for ``environment = "login"`` is not the session being opened.

The capture starts inside the first open's spawn, where the recorder learns which
session a new process is for; it runs in a context of its own, so the recorder records
the session's shell, not the login shell that ran before it (SPEC §32.1, §23).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import call_value as call
from .support import cast_files, events_of, read_cast, records_config, records_harness


async def test_the_session_is_recorded_not_the_login_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text("export FROM_LOGIN=login-ran\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/bash")
    recordings = tmp_path / "casts"
    config = records_config(recordings, **{"terminal-bash": {"environment": "login"}})
    async with records_harness(config) as h:
        agent = h.create_agent("a")
        sid = (await call(h, agent, "terminal_open", {"type": "shell"}))["sessionId"]
        sent = await call(h, agent, "terminal_send", {"sessionId": sid, "text": "echo $FROM_LOGIN"})
        assert sent["viewport"] == "login-ran\n"
    casts = cast_files(recordings)
    assert [read_cast(path)[0]["title"] for path in casts] == [sid]
    assert "login-ran" in "".join(events_of(read_cast(casts[0])[1], "o"))
