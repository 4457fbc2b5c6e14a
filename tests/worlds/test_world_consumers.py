"""Consumers built on ``ctx.pty`` work in a world without a change of their own."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness

from .world_fixture import needs_namespaces, world_config

pytestmark = [needs_namespaces, pytest.mark.bwrap]


async def test_ctx_pty_opens_sends_and_waits_in_a_world() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("pty-in-world")
        pty = h.ctx.pty
        opened = await pty.open(agent, {"command": "echo opened-$(hostname)", "world": "ns"})
        assert "opened-world-ns" in opened.initial_output
        [row] = h.ctx.terminals.list(agent)
        assert row.world == "ns"
        await pty.send(agent, opened.session_id, {"data": "sleep 0.2; echo ready-now"})
        waited = await pty.wait(agent, opened.session_id, re.compile(r"^ready-now$"), 10000)
        assert waited.reason == "match" and waited.matched == "ready-now"
        assert await pty.close(agent, opened.session_id)
        await agent.dispose()


@pytest.mark.skipif(shutil.which("gdb") is None or shutil.which("gcc") is None, reason="gdb, gcc")
async def test_the_gdb_consumer_debugs_in_the_default_world(tmp_path: Path) -> None:
    (tmp_path / "prog.c").write_text(
        "#include <stdio.h>\nint main(void) {\n  int counter = 41;\n  counter++;\n"
        '  printf("counter is %d\\n", counter);\n  return 0;\n}\n'
    )
    subprocess.run(["gcc", "-g", "-O0", "-o", "prog", "prog.c"], cwd=tmp_path, check=True)
    config = world_config()
    config["worlds"]["default"] = "ns"
    config["sandbox-policy"]["workspace_root"] = str(tmp_path)
    async with Harness(config=config) as h:
        agent = h.create_agent("gdb-in-world")

        async def call(command: str, **extra: Any) -> Any:
            result = await h.call_tool(agent, "gdb_mi", {"command": command, **extra})
            assert not result.is_error, result.text
            return result.value

        await call(f"-file-exec-and-symbols {tmp_path}/prog")
        await call("-break-insert prog.c:4")
        run = await call("-exec-run")
        assert run["records"][-1]["results"]["frame"]["line"] == "4"
        value = await call("-data-evaluate-expression counter")
        assert value["records"][-1]["results"] == {"value": "41"}
        [row] = h.ctx.terminals.list(agent)
        assert row.world == "ns"
        await call("-gdb-exit")
        await agent.dispose()
