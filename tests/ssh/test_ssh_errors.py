"""Login failures are fast and carry stable codes; bad input is refused before anything runs."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args, ssh_config
from .sshd import PASSWORD_USER, Sshd, keygen


async def _open_error(h: Harness, args: dict[str, Any]) -> tuple[str, float]:
    agent = h.create_agent("e")
    loop = asyncio.get_running_loop()
    started = loop.time()
    r = await h.call_tool(agent, "ssh_open", args)
    elapsed = loop.time() - started
    assert r.is_error, r.value
    await agent.dispose()
    return r.text, elapsed


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


async def test_a_closed_port_is_ssh_connect(sshd: Sshd, harness: Harness) -> None:
    text, elapsed = await _open_error(harness, open_args(sshd, port=_closed_port()))
    assert text.startswith("error [SSH_CONNECT]: "), text
    assert "Connection refused" in text
    assert elapsed < 5


async def test_a_key_the_server_does_not_know_is_ssh_auth_fast(
    sshd: Sshd, harness: Harness, tmp_path: Path
) -> None:
    stranger = keygen(tmp_path / "stranger")
    text, elapsed = await _open_error(harness, open_args(sshd, identityFile=str(stranger)))
    assert text.startswith("error [SSH_AUTH]: "), text
    assert "Permission denied" in text
    assert elapsed < 5


async def test_a_password_only_user_is_ssh_auth_without_typing_a_password(
    sshd: Sshd, harness: Harness
) -> None:
    text, elapsed = await _open_error(harness, open_args(sshd, user=PASSWORD_USER))
    assert text.startswith("error [SSH_AUTH]: "), text
    assert "Permission denied" in text and "password" in text
    assert elapsed < 5
    # No password attempt reached the server: it logged no failed password.
    log = (sshd.directory / "sshd.log").read_text()
    assert "Failed password" not in log


async def test_a_key_with_a_passphrase_is_ssh_auth_without_a_prompt(
    sshd: Sshd, harness: Harness, tmp_path: Path
) -> None:
    locked = keygen(tmp_path / "locked", passphrase="not typed by anyone")
    (sshd.directory / "authorized_keys").write_text(
        sshd.client_key.with_suffix(".pub").read_text() + (tmp_path / "locked.pub").read_text()
    )
    text, elapsed = await _open_error(harness, open_args(sshd, identityFile=str(locked)))
    assert text.startswith("error [SSH_AUTH]: "), text
    assert "passphrase" in text
    assert elapsed < 5


async def test_a_changed_host_key_is_ssh_host_key(sshd: Sshd, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other_host_key")
    known = tmp_path / "known_hosts"
    known.write_text(f"{sshd.known_hosts_name} {(tmp_path / 'other_host_key.pub').read_text()}")
    for policy in ("strict", "accept-new"):
        config = ssh_config(tmp_path, host_key_policy=policy)
        async with Harness(config=config) as h:
            text, elapsed = await _open_error(h, open_args(sshd))
        assert text.startswith("error [SSH_HOST_KEY]: "), text
        assert elapsed < 5
    assert other.exists()


async def test_an_unknown_host_is_refused_under_strict_and_recorded_under_accept_new(
    sshd: Sshd, tmp_path: Path
) -> None:
    async with Harness(config=ssh_config(tmp_path, host_key_policy="strict")) as h:
        text, _ = await _open_error(h, open_args(sshd))
    assert text.startswith("error [SSH_HOST_KEY]: "), text
    assert not (tmp_path / "known_hosts").exists() or not (tmp_path / "known_hosts").read_text()
    async with Harness(config=ssh_config(tmp_path)) as h:
        agent = h.create_agent("a")
        r = await h.call_tool(agent, "ssh_open", open_args(sshd))
        assert not r.is_error, r.text
        await agent.dispose()
    recorded = (tmp_path / "known_hosts").read_text()
    assert recorded.startswith(f"{sshd.known_hosts_name} ")
    async with Harness(config=ssh_config(tmp_path, host_key_policy="strict")) as h:
        agent = h.create_agent("a")
        r = await h.call_tool(agent, "ssh_open", open_args(sshd))
        assert not r.is_error, r.text  # now known: strict accepts it
        await agent.dispose()


async def test_a_confined_owner_without_network_is_told_what_to_set(
    sshd: Sshd, tmp_path: Path
) -> None:
    config = {
        "sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)},
        "ssh": {"known_hosts_file": str(tmp_path / "known_hosts")},
    }
    async with Harness(config=config) as h:
        text, elapsed = await _open_error(h, open_args(sshd))
    assert text.startswith("error [SSH_CONNECT]: "), text
    assert 'sandbox-policy.network = "host"' in text and "danger-full-access" in text
    assert elapsed < 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"host": "-oProxyCommand=x"}, "host"),
        ({"host": "a b"}, "host"),
        ({"host": "h", "port": 0}, "port"),
        ({"host": "h", "user": "-l"}, "user"),
        ({"host": "h", "bogus": 1}, "bogus"),
    ],
)
async def test_bad_open_arguments_are_refused(
    harness: Harness, args: dict[str, Any], needle: str
) -> None:
    agent = harness.create_agent("a")
    r = await harness.call_tool(agent, "ssh_open", args)
    assert r.is_error and r.text.startswith("error [INVALID_ARGUMENT]"), r.text
    assert needle in r.text
    await agent.dispose()
