"""What a world decides for itself: its sandbox default, its name in every error it
sends, and the config that bounds how fast a frozen world is found (SPEC §29)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason
from dsh_terminal_core.worlds.config import WorldEntry
from dsh_terminal_core.worlds.messages import error_from_wire

from .world_fixture import needs_namespaces, world_command


def test_every_error_from_a_world_names_it() -> None:
    said = error_from_wire({"code": "SANDBOX_UNAVAILABLE", "message": "no bwrap here"}, "box")
    assert said.code == "SANDBOX_UNAVAILABLE" and said.message == "world 'box': no bwrap here"
    named = error_from_wire({"code": "SESSION_EXITED", "message": "world 'box' ended"}, "box")
    assert named.message == "world 'box' ended"


@pytest.mark.parametrize(
    "entry",
    [
        {"command": ["x"], "heartbeat_s": 0},
        {"command": ["x"], "heartbeat_s": 7200},
        {"command": ["x"], "state": []},
        {"command": ["x"], "state": ["podman", ""]},
    ],
)
def test_heartbeat_and_state_are_checked(entry: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorldEntry(**entry)  # type: ignore[arg-type]


def test_heartbeat_and_state_are_kept() -> None:
    entry = WorldEntry(command=["x"], heartbeat_s=1.5, state=["podman", "inspect", "box"])
    assert entry.heartbeat_s == 1.5 and entry.state == ("podman", "inspect", "box")
    assert WorldEntry(command=["x"]).heartbeat_s is None


@needs_namespaces
@pytest.mark.bwrap
async def test_a_world_keeps_its_own_sandbox_default_not_the_harness_default(
    tmp_path: Path,
) -> None:
    # The harness defaults to workspace-write (its own bubblewrap, a private /tmp); the
    # world was started with danger-full-access. An owner on the default takes the
    # world's mode: its shell writes into this test's directory under /tmp, which a
    # confined shell could not even see.
    config = {"worlds": {"worlds": {"ns": {"command": world_command()}}}}
    async with Harness(config=config) as h:
        agent = h.create_agent("world-default")
        assert h.ctx.sandbox_policy.resolve(agent).confined
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
        done = await h.ctx.terminals.start_send(
            agent, opened.session_id, SendRequest(text=f"touch {tmp_path}/wrote && echo wrote")
        ).done
        assert done.wait_reason is WaitReason.STDIN_READ and done.viewport.strip() == "wrote"
        assert (tmp_path / "wrote").exists()
        await agent.dispose()
