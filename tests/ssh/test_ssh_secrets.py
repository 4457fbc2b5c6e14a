"""ssh_open answers password and key-passphrase prompts from named secrets, never typed.

The password login runs against a server of its own that sees a test account only in
its private mount namespace (copies of /etc/passwd and /etc/shadow bound over the
real ones there), so no account is ever added to the machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args, ssh_config
from .sshd import PASSWORD_USER, SSHD, Sshd, _config, _free_port, _listening, available, keygen

PASSPHRASE = "key pass phrase 7"
PASSWORD = "login-Pässword 9"
TEST_UID = 64917


@pytest.fixture
async def secret_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    monkeypatch.setenv("SSH_TEST_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("SSH_TEST_PASSWORD", PASSWORD)
    monkeypatch.setenv("SSH_TEST_WRONG", "not it")
    config = ssh_config(tmp_path)
    config["secrets"] = {
        "env": {
            "keypass": "SSH_TEST_PASSPHRASE",
            "pw": "SSH_TEST_PASSWORD",
            "wrong": "SSH_TEST_WRONG",
        }
    }
    async with Harness(config=config) as h:
        yield h


def _never_shown(texts: list[str], caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    for secret in secrets:
        for text in [*texts, caplog.text]:
            assert secret not in text


async def test_a_key_passphrase_comes_from_a_named_secret(
    sshd: Sshd, secret_harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = keygen(tmp_path / "locked", PASSPHRASE)
    authorized = sshd.directory / "authorized_keys"
    authorized.write_text(authorized.read_text() + (tmp_path / "locked.pub").read_text())
    h = secret_harness
    agent = h.create_agent("k")
    seen: list[str] = []
    for name in ("wrong", None):  # a wrong passphrase, and none: both SSH_AUTH, nothing typed
        args = open_args(sshd, identityFile=str(key))
        if name is not None:
            args["passphraseSecret"] = name
        refused = await h.call_tool(agent, "ssh_open", args)
        seen.append(refused.text)
        assert refused.text.startswith("error [SSH_AUTH]"), refused.text
    unknown = await h.call_tool(
        agent, "ssh_open", {**open_args(sshd, identityFile=str(key)), "passphraseSecret": "nope"}
    )
    assert unknown.text.startswith("error [NO_SECRET]"), unknown.text
    opened = await h.call_tool(
        agent, "ssh_open", {**open_args(sshd, identityFile=str(key)), "passphraseSecret": "keypass"}
    )
    seen.append(opened.text)
    assert not opened.is_error, opened.text
    ran = await h.call_tool(
        agent, "ssh_run", {"sessionId": opened.value["sessionId"], "command": "echo in:$USER"}
    )
    seen.append(ran.text)
    assert "in:root" in ran.text
    await h.call_tool(agent, "ssh_close", {"sessionId": opened.value["sessionId"]})
    # The helper and its socket are gone once the login is over.
    assert not [p for p in Path(tempfile.gettempdir()).glob("dsh-ssh-*/o*/askpass-*")]
    _never_shown(seen, caplog, PASSPHRASE)


@contextlib.contextmanager
def password_sshd(directory: Path) -> Iterator[tuple[Sshd, str]]:
    """A server that knows one password account, in a mount namespace of its own."""
    directory.mkdir(parents=True)
    # The account's home must be reachable by it: not under the 0700 pytest directory.
    home_dir = tempfile.TemporaryDirectory(prefix="dsh-pwhome-")
    home = Path(home_dir.name)
    os.chown(home, TEST_UID, TEST_UID)
    hashed = (
        subprocess.run(
            ["openssl", "passwd", "-6", "-stdin"],
            input=PASSWORD.encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    passwd = directory / "passwd"
    passwd.write_text(
        Path("/etc/passwd").read_text()
        + f"{PASSWORD_USER}:x:{TEST_UID}:{TEST_UID}::{home}:/bin/bash\n"
    )
    shadow = directory / "shadow"
    shadow.write_text(
        Path("/etc/shadow").read_text() + f"{PASSWORD_USER}:{hashed}:19000:0:99999:7:::\n"
    )
    shadow.chmod(0o600)
    host_key = keygen(directory / "host_key")
    authorized = directory / "authorized_keys"
    authorized.write_text("")
    (directory / "banner").write_text("dsh test server: authorized use only\n")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    port, sh_port = _free_port("127.0.0.1"), _free_port("127.0.0.1")
    config = _config(directory, "127.0.0.1", (port, sh_port), host_key, authorized)
    script = f'mount --bind {passwd} /etc/passwd && mount --bind {shadow} /etc/shadow && exec "$@"'
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        SSHD,
        "-D",
        "-e",
        "-f",
        str(config),
    ]
    with open(directory / "sshd.log", "ab") as log:
        process = subprocess.Popen(argv, stderr=log)
    server = Sshd(
        host="127.0.0.1",
        port=port,
        directory=directory,
        host_key=host_key,
        client_key=host_key,
        process=process,
    )
    try:
        if not _listening("127.0.0.1", port, process, None):
            raise RuntimeError((directory / "sshd.log").read_text()[-2000:])
        yield server, str(home)
    finally:
        server.stop()
        home_dir.cleanup()


@pytest.mark.skipif(
    available() is not None or shutil.which("unshare") is None,
    reason="needs root, sshd and unshare",
)
async def test_a_password_login_comes_from_a_named_secret(
    secret_harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    h = secret_harness
    agent = h.create_agent("p")
    seen: list[str] = []
    with password_sshd(tmp_path / "server") as (server, home):
        base: dict[str, Any] = {"host": server.host, "port": server.port, "user": PASSWORD_USER}
        refused = await h.call_tool(agent, "ssh_open", base)
        assert refused.text.startswith("error [SSH_AUTH]"), refused.text
        wrong = await h.call_tool(agent, "ssh_open", {**base, "passwordSecret": "wrong"})
        assert wrong.text.startswith("error [SSH_AUTH]"), wrong.text
        opened = await h.call_tool(agent, "ssh_open", {**base, "passwordSecret": "pw"})
        seen += [refused.text, wrong.text, opened.text]
        assert not opened.is_error, opened.text
        ran = await h.call_tool(
            agent,
            "ssh_run",
            {"sessionId": opened.value["sessionId"], "command": "id -u; echo $HOME"},
        )
        seen.append(ran.text)
        assert str(TEST_UID) in ran.text and home in ran.text
        await h.call_tool(agent, "ssh_close", {"sessionId": opened.value["sessionId"]})
        await agent.dispose()
        log = (server.directory / "sshd.log").read_text()
    _never_shown(seen, caplog, PASSWORD)
    assert PASSWORD not in log
