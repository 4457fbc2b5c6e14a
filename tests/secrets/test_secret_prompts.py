"""Secrets typed at real hidden-input prompts, from configured sources, never shown."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core import hookimpl
from dsh_terminal_core.kernel.errors import ConfigError
from dsh_terminal_core.kernel.plugins import PluginInfo

from .support import Transcript, digest, secret_harness

OLD = "old pass-phrase ünï 1"
NEW = "new-Pass_phrase 2"
TOKEN = "tok3n value; not $HOME"


@pytest.fixture
def env_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("SECRET_TEST_OLD", OLD)
    monkeypatch.setenv("SECRET_TEST_TOKEN", TOKEN)
    return {"old": "SECRET_TEST_OLD", "token": "SECRET_TEST_TOKEN"}


def private_file(tmp_path: Path, values: dict[str, str], mode: int = 0o600) -> str:
    path = tmp_path / "secrets.json"
    path.write_text(__import__("json").dumps(values))
    path.chmod(mode)
    return str(path)


async def open_shell(t: Transcript) -> str:
    opened = await t.call("terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def until_hidden(t: Transcript, sid: str, command: str) -> dict[str, Any]:
    sent = await t.call("terminal_send", {"sessionId": sid, "text": command})
    assert not sent.is_error, sent.text
    assert sent.value["waitReason"] == "stdin_read", sent.value
    assert sent.value["inputHidden"] is True, sent.value
    return dict(sent.value)


async def test_read_s_gets_an_environment_secret(
    env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with secret_harness({"env": env_secrets}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        await until_hidden(t, sid, "read -r -s -p 'Password: ' pw")
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert not typed.is_error, typed.text
        assert typed.value["waitReason"] == "stdin_read" and typed.value["exitCode"] == 0
        shown = await t.call(
            "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
        )
        assert digest(TOKEN) in shown.text
        await t.assert_never_shows(sid, TOKEN, OLD)


async def test_python_getpass_gets_a_file_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = private_file(tmp_path, {"db": TOKEN})
    async with secret_harness({"file": path}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        script = (
            "import getpass, hashlib; p = getpass.getpass('DB password: '); "
            "print('got', hashlib.sha256(p.encode()).hexdigest())"
        )
        await until_hidden(t, sid, f'python3 -c "{script}"')
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "db"}})
        assert not typed.is_error, typed.text
        assert f"got {digest(TOKEN)}" in typed.text
        assert typed.value["exitCode"] == 0
        await t.assert_never_shows(sid, TOKEN)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
async def test_ssh_keygen_changes_a_passphrase(
    tmp_path: Path, env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "id_test"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", OLD, "-f", str(key)], check=True)
    path = private_file(tmp_path, {"new": NEW})
    async with secret_harness({"env": env_secrets, "file": path}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        await until_hidden(t, sid, f"ssh-keygen -p -f {key}")
        for name in ("old", "new"):
            typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": name}})
            assert not typed.is_error, typed.text
            assert typed.value["inputHidden"] is True, typed.value
        done = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "new"}})
        assert not done.is_error, done.text
        assert done.value["exitCode"] == 0, done.text
        assert "Your identification has been saved with the new passphrase" in done.text
        await t.assert_never_shows(sid, OLD, NEW)
    opened = subprocess.run(
        ["ssh-keygen", "-y", "-P", NEW, "-f", str(key)], capture_output=True, check=False
    )
    assert opened.returncode == 0, opened.stderr


async def test_no_hidden_prompt_writes_nothing(
    env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with secret_harness({"env": env_secrets}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        # At the shell prompt, and at a program reading with echo on: refused, nothing typed.
        refused = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert refused.is_error and "[NOT_AT_SECRET_PROMPT]" in refused.text
        waiting = await t.call("terminal_send", {"sessionId": sid, "text": "head -n1 | wc -c"})
        assert waiting.value["waitReason"] == "stdin_read"
        assert waiting.value["inputHidden"] is False
        refused = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert refused.is_error and "[NOT_AT_SECRET_PROMPT]" in refused.text
        session = h.ctx.terminals.get_session(t.agent, sid)
        assert session._process.unread_input() == 0
        line = await t.call("terminal_send", {"sessionId": sid, "text": "x"})
        assert line.value["exitCode"] == 0 and line.text.splitlines()[0].strip() == "2", line.text
        await t.assert_never_shows(sid, TOKEN)


async def test_unknown_name_is_no_secret_before_anything_else(
    env_secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SECRET_TEST_TOKEN")
    async with secret_harness({"env": env_secrets}) as h:
        agent = h.create_agent("a")
        for name in ("nope", "token"):  # unknown, and mapped to an unset variable
            result = await h.call_tool(
                agent, "terminal_send", {"sessionId": "pty-404", "secret": {"name": name}}
            )
            assert result.is_error and result.text.startswith("error [NO_SECRET]"), result.text


async def test_secret_is_exclusive_with_text_and_well_formed(
    env_secrets: dict[str, str],
) -> None:
    async with secret_harness({"env": env_secrets}) as h:
        agent = h.create_agent("a")
        bad: list[dict[str, Any]] = [
            {"sessionId": "pty-1", "text": "x", "secret": {"name": "token"}},
            {"sessionId": "pty-1", "secret": {"name": "token"}, "submit": False},
            {"sessionId": "pty-1", "secret": {"name": "token", "ask": "why"}},
            {"sessionId": "pty-1", "secret": {}},
            {"sessionId": "pty-1", "secret": {"value": TOKEN}},
        ]
        for args in bad:
            result = await h.call_tool(agent, "terminal_send", args)
            assert result.is_error and "[INVALID_ARGUMENT]" in result.text, (args, result.text)
            assert TOKEN not in result.text
        asked = await h.call_tool(
            agent, "terminal_send", {"sessionId": "pty-1", "secret": {"ask": "sudo"}}
        )
        assert asked.is_error and asked.text.startswith("error [NO_SECRET]"), asked.text


async def test_a_shared_file_fails_at_startup_naming_it(tmp_path: Path) -> None:
    path = private_file(tmp_path, {"db": TOKEN}, mode=0o640)
    with pytest.raises(ConfigError) as raised:
        async with secret_harness({"file": path}):
            pass
    assert path in str(raised.value) and "group or others" in str(raised.value)
    assert TOKEN not in str(raised.value)
    os.chmod(path, 0o600)
    (tmp_path / "secrets.json").write_text('{"db": 1}')
    with pytest.raises(ConfigError, match="string values"):
        async with secret_harness({"file": path}):
            pass


class VaultPlugin:
    """A third-party source: answers one name, asynchronously, for one owner."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    @hookimpl
    def dsh_plugin_info(self) -> PluginInfo:
        return PluginInfo(name="test-vault")

    @hookimpl
    def dsh_apply(self) -> None:
        pass

    @hookimpl
    def dsh_secret_source(self, name: str, owner: Any) -> Any:
        self.asked.append((name, owner.id))
        if name != "vaulted":
            return None

        async def fetch() -> str:
            return TOKEN

        return fetch()


async def test_a_secret_source_hook_answers(caplog: pytest.LogCaptureFixture) -> None:
    vault = VaultPlugin()
    async with secret_harness({}, extra=[vault]) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        await until_hidden(t, sid, "read -r -s pw")
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "vaulted"}})
        assert not typed.is_error, typed.text
        shown = await t.call(
            "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
        )
        assert digest(TOKEN) in shown.text
        missing = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "other"}})
        assert missing.text.startswith("error [NO_SECRET]")
        assert vault.asked == [("vaulted", "a"), ("other", "a")]
        await t.assert_never_shows(sid, TOKEN)


async def test_fifty_prompts_in_a_row_each_get_the_secret_once(
    env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    rounds = 50
    async with secret_harness({"env": env_secrets}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        loop = (
            f'for i in $(seq {rounds}); do read -r -s -p "p$i: " pw; echo; '
            "printf '%s' \"$pw\" | sha256sum; done; echo finished"
        )
        await until_hidden(t, sid, loop)
        for index in range(1, rounds + 1):
            typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
            assert not typed.is_error, (index, typed.text)
            assert typed.text.count(digest(TOKEN)) == 1, (index, typed.text)
            if index < rounds:
                assert typed.value["inputHidden"] is True, (index, typed.value)
                assert f"p{index + 1}: " in typed.text
        assert "finished" in typed.text and typed.value["exitCode"] == 0
        await t.assert_never_shows(sid, TOKEN)


async def test_a_hidden_prompt_inside_a_screen_session(
    env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with secret_harness({"env": env_secrets}) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        opened = await t.call("terminal_open", {"screen": True, "rows": 24, "cols": 80})
        assert not opened.is_error, opened.text
        sid = str(opened.value["sessionId"])
        script = (
            "import getpass, hashlib; print('\\033[?1049h', end=''); "
            "p = getpass.getpass('Screen password: '); print('\\033[?1049l', end=''); "
            "print('got', hashlib.sha256(p.encode()).hexdigest())"
        )
        await until_hidden(t, sid, f'python3 -c "{script}"')
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert not typed.is_error, typed.text
        assert typed.value["exitCode"] == 0, typed.value
        assert f"got {digest(TOKEN)}" in typed.text
        screen = await t.call("terminal_read", {"sessionId": sid, "screen": True})
        assert not screen.is_error, screen.text
        await t.assert_never_shows(sid, TOKEN)
