"""Fixtures for the ssh consumer: one throwaway sshd per module, a harness per test."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness

from .sshd import Sshd, available, netns_unavailable, network_namespace, running_sshd


@pytest.fixture(scope="module", params=["loopback", "netns"])
def sshd(request: pytest.FixtureRequest) -> Iterator[Sshd]:
    """The server every ssh test runs against: on 127.0.0.1, then as a second "host"
    in its own network namespace, reached over a veth pair (skipped where the machine
    allows no network namespaces)."""
    reason = available()
    if reason is None and request.param == "netns":
        reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsh-sshd-")))
        if request.param == "netns":
            name, address = stack.enter_context(network_namespace())
            yield stack.enter_context(running_sshd(directory, host=address, netns=name))
        else:
            yield stack.enter_context(running_sshd(directory))


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
