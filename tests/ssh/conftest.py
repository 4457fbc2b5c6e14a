"""Fixtures for the ssh consumer: one throwaway sshd per module, a harness per test."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.harness import Harness

from .sshd import Sshd, available, running_sshd


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with (
        tempfile.TemporaryDirectory(prefix="dsh-sshd-") as directory,
        running_sshd(Path(directory)) as server,
    ):
        yield server


def ssh_config(tmp_path: Path, **ssh: Any) -> dict[str, Any]:
    """Harness config: unconfined shells, the plugin's own known-hosts file under tmp_path."""
    section = {"known_hosts_file": str(tmp_path / "known_hosts"), **ssh}
    return {"sandbox-policy": {"mode": "danger-full-access"}, "ssh": section}


def open_args(server: Sshd, **extra: Any) -> dict[str, Any]:
    return {
        "host": server.host,
        "port": server.port,
        "user": "root",
        "identityFile": str(server.client_key),
        **extra,
    }


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(config=ssh_config(tmp_path)) as h:
        yield h
