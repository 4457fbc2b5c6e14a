"""Confined shells: ssh works once the operator gives them the host's network."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from .conftest import open_args
from .sshd import Sshd

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(
        not BwrapSandbox(BwrapConfig()).available(), reason="bubblewrap is not usable here"
    ),
]


async def test_a_confined_owner_with_host_network_opens_runs_and_reuses_its_master(
    sshd: Sshd, tmp_path: Path
) -> None:
    config = {
        "sandbox-policy": {
            "mode": "workspace-write",
            "workspace_root": str(tmp_path),
            "network": "host",
        },
        # The confined shell may write only the workspace: keep the known hosts there.
        "ssh": {"known_hosts_file": str(tmp_path / "known_hosts")},
    }
    # A confined shell has its own /tmp: hand it the key inside the workspace.
    key = tmp_path / "id"
    key.write_bytes(sshd.client_key.read_bytes())
    key.chmod(0o600)
    target = open_args(sshd, identityFile=str(key))
    async with Harness(config=config) as h:
        agent = h.create_agent("c")
        first = await h.call_tool(agent, "ssh_open", target)
        assert not first.is_error, first.text
        r = await h.call_tool(
            agent, "ssh_run", {"sessionId": first.value["sessionId"], "command": "echo hi"}
        )
        assert (r.value["output"], r.value["exitCode"]) == ("hi\n", 0)
        second = await h.call_tool(agent, "ssh_open", target)
        assert not second.is_error, second.text
        await agent.dispose()
    assert (tmp_path / "known_hosts").read_text().startswith(f"{sshd.known_hosts_name} ")
