"""``terminal_list`` says the ssh consumer opened its sessions (SPEC §25.5).

The pty sessions under an ssh session (its client and the destination's control
master) belong to the same agent, so ``terminal_list`` shows them; ``openedBy: "ssh"``
tells a model they are driven with ``ssh_run``, not typed into with ``terminal_send``.
"""

from __future__ import annotations

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args
from .sshd import Sshd


async def test_the_sessions_an_ssh_open_starts_say_ssh(sshd: Sshd, harness: Harness) -> None:
    agent = harness.create_agent("a")
    opened = await harness.call_tool(agent, "ssh_open", open_args(sshd))
    assert not opened.is_error, opened.text
    own = await harness.call_tool(agent, "terminal_open", {})
    listed = (await harness.call_tool(agent, "terminal_list", {})).value["sessions"]
    opened_by = {s["sessionId"]: s["openedBy"] for s in listed}
    assert opened_by.pop(own.value["sessionId"]) == "terminal"
    assert opened_by and set(opened_by.values()) == {"ssh"}, listed
    await harness.call_tool(agent, "ssh_close", {"sessionId": opened.value["sessionId"]})
    await agent.dispose()
