"""Secrets never reach a recording or the audit log (SPEC §23), through the §17 flows."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.secret import Secret, SecretAsk

from ..secrets.support import Transcript, digest
from .support import events_of, only_cast, read_cast, records_config

OLD = "old pass-phrase ünï 1"
NEW = "new-Pass_phrase 2"
TOKEN = "tok3n value; not $HOME"
ASKED = "typed by a person ✓"


@pytest.fixture
def env_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("RECORDS_TEST_OLD", OLD)
    monkeypatch.setenv("RECORDS_TEST_TOKEN", TOKEN)
    return {"old": "RECORDS_TEST_OLD", "token": "RECORDS_TEST_TOKEN"}


def secret_file(tmp_path: Path, values: dict[str, str]) -> str:
    path = tmp_path / "secrets.json"
    path.write_text(json.dumps(values))
    path.chmod(0o600)
    return str(path)


def assert_nowhere(records: Path, *values: str) -> None:
    """No byte sequence of any value in any file the records wrote."""
    files = [p for p in records.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for value in values:
            assert value.encode() not in data, (path.name, value)
            # the JSON escaping of the value, too (a cast line escapes non-ASCII only
            # when asked to; an audit line never does)
            assert json.dumps(value)[1:-1].encode() not in data, (path.name, value)


async def open_shell(t: Transcript) -> str:
    opened = await t.call("terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def until_hidden(t: Transcript, sid: str, command: str) -> None:
    sent = await t.call("terminal_send", {"sessionId": sid, "text": command})
    assert sent.value["waitReason"] == "stdin_read" and sent.value["inputHidden"], sent.value


def _config(records: Path, secrets: dict[str, Any]) -> dict[str, Any]:
    return records_config(records / "casts", records / "audit.jsonl", secrets=secrets)


async def test_read_s_with_a_named_secret(
    tmp_path: Path, env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    records = tmp_path / "records"
    async with Harness(config=_config(records, {"env": env_secrets})) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        await until_hidden(t, sid, "read -r -s -p 'Password: ' pw")
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert not typed.is_error and typed.value["exitCode"] == 0, typed.text
        shown = await t.call(
            "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
        )
        assert digest(TOKEN) in shown.text
        await t.assert_never_shows(sid, TOKEN, OLD)
        await t.call("terminal_close", {"sessionId": sid})

    _, events = read_cast(only_cast(records / "casts"))
    assert "[secret]\r" in events_of(events, "i")
    assert "send: stdin_read exit=0" in events_of(events, "m")
    assert_nowhere(records, TOKEN, OLD)
    audit = [json.loads(line) for line in (records / "audit.jsonl").read_text().splitlines()]
    secret_calls = [e for e in audit if "secret" in e["args"]]
    assert [e["args"]["secret"] for e in secret_calls] == [{"name": "token"}]  # the name, kept
    assert secret_calls[0]["outcome"] == {
        "isError": False,
        "waitReason": "stdin_read",
        "exitCode": 0,
    }


async def test_getpass_with_a_file_secret_and_one_asked_of_a_person(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = tmp_path / "records"
    asked: list[SecretAsk] = []

    async def person(ask: SecretAsk) -> Secret:
        asked.append(ask)
        return Secret(ASKED)

    path = secret_file(tmp_path, {"db": TOKEN})
    async with Harness(config=_config(records, {"file": path})) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        script = (
            "import getpass, hashlib\nfor _ in range(2): p = getpass.getpass('DB password: '); "
            "print('got', hashlib.sha256(p.encode()).hexdigest())"
        )
        await until_hidden(t, sid, f'python3 -c "{script}"')
        typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "db"}})
        assert f"got {digest(TOKEN)}" in typed.text, typed.text
        typed = await t.call(
            "terminal_send",
            {"sessionId": sid, "secret": {"ask": "the database"}},
            ask_secret=person,
        )
        assert f"got {digest(ASKED)}" in typed.text and typed.value["exitCode"] == 0, typed.text
        assert [a.reason for a in asked] == ["the database"]
        await t.assert_never_shows(sid, TOKEN, ASKED)

    _, events = read_cast(only_cast(records / "casts"))
    assert events_of(events, "i").count("[secret]\r") == 2
    assert_nowhere(records, TOKEN, ASKED)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
async def test_ssh_keygen_passphrases(
    tmp_path: Path, env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    records = tmp_path / "records"
    key = tmp_path / "id_test"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", OLD, "-f", str(key)], check=True)
    path = secret_file(tmp_path, {"new": NEW})
    async with Harness(config=_config(records, {"env": env_secrets, "file": path})) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        await until_hidden(t, sid, f"ssh-keygen -p -f {key}")
        for name in ("old", "new", "new"):
            typed = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": name}})
            assert not typed.is_error, typed.text
        assert typed.value["exitCode"] == 0, typed.text
        await t.assert_never_shows(sid, OLD, NEW)
    _, events = read_cast(only_cast(records / "casts"))
    assert events_of(events, "i").count("[secret]\r") == 3
    assert_nowhere(records, OLD, NEW)


async def test_a_refused_secret_writes_nothing_and_records_the_refusal(
    tmp_path: Path, env_secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    records = tmp_path / "records"
    async with Harness(config=_config(records, {"env": env_secrets})) as h:
        t = Transcript(h, h.create_agent("a"), caplog)
        sid = await open_shell(t)
        refused = await t.call("terminal_send", {"sessionId": sid, "secret": {"name": "token"}})
        assert refused.is_error and "[NOT_AT_SECRET_PROMPT]" in refused.text
        # typed as text afterwards, the characters are recorded as typed: text is text
        await t.call("terminal_send", {"sessionId": sid, "text": "echo plain"})
    _, events = read_cast(only_cast(records / "casts"))
    assert "[secret]" not in "".join(events_of(events, "i"))
    assert "echo plain\r" in events_of(events, "i")
    audit = [json.loads(line) for line in (records / "audit.jsonl").read_text().splitlines()]
    refusal = next(e for e in audit if "secret" in e["args"])
    assert refusal["outcome"] == {"isError": True, "code": "NOT_AT_SECRET_PROMPT"}
    assert_nowhere(records, TOKEN)
