"""Every tool declares the schema of its value, and real values conform to it.

MCP clients receive the schema as ``outputSchema`` and reject a result that does not
match, so a drifting value would break every client at once.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access


async def test_every_tool_declares_a_valid_output_schema() -> None:
    async with Harness(config=full_access()) as h:
        schemas = h.tool_schemas()
    assert len(schemas) >= 13
    for schema in schemas:
        output = schema.get("outputSchema")
        assert output is not None, schema["name"]
        assert output["type"] == "object", schema["name"]  # MCP requires an object
        jsonschema.Draft202012Validator.check_schema(output)


async def test_real_values_conform_to_their_schemas(tmp_path: Any) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        schemas = {s["name"]: s["outputSchema"] for s in h.tool_schemas()}
        agent = h.create_agent("a")
        seen: set[str] = set()

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            result = await h.call_tool(agent, name, args)
            assert not result.is_error, result.text
            jsonschema.validate(result.value, schemas[name])
            seen.add(name)
            return result.value  # type: ignore[no-any-return]

        sid = (await call("terminal_open", {"name": "s"}))["sessionId"]
        await call("terminal_send", {"sessionId": sid, "text": "seq 1 3; false"})
        await call("terminal_read", {"sessionId": sid, "offset": 1, "count": 2})
        await call("terminal_read", {"sessionId": sid, "offset": 10_000})  # past the end
        await call("terminal_search", {"sessionId": sid, "pattern": "2", "context": 1})
        await call("terminal_search", {"sessionId": sid, "pattern": "^$", "regex": True})
        await call("terminal_list", {})
        job = await call(
            "terminal_send", {"sessionId": sid, "text": "sleep 30", "run_in_background": True}
        )
        await call("job_output", {"jobId": job["jobId"]})
        await call("job_kill", {"jobId": job["jobId"]})
        done = await call("job_output", {"jobId": job["jobId"], "wait": True, "timeoutMs": 10_000})
        assert done["status"] != "running"
        # At the prompt the foreground group is the shell's own, which ignores SIGINT.
        await call("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        exited = await call("terminal_send", {"sessionId": sid, "text": "exit 3"})
        assert exited["waitReason"] == "session_exit"
        await call("terminal_list", {})
        await call("terminal_close", {"sessionId": sid})
        resized = (await call("terminal_open", {}))["sessionId"]
        await call("terminal_resize", {"sessionId": resized, "rows": 30, "cols": 100})
        await call("terminal_watch", {"sessionId": resized})
        await call("terminal_watch", {"sessionId": resized, "control": True, "ttlS": 60})
        await call("terminal_ask_human", {"sessionId": resized, "reason": "x"})  # unavailable
        terminals = h.ctx.terminals
        for reader in ("terminal_send", "terminal_read"):  # a person's time rides on each
            await terminals.take_control(agent, resized)
            await terminals.type_as_person(agent, resized, "echo person\r")
            await terminals.hand_back(agent, resized)
            args = {"sessionId": resized, "text": "true"} if reader == "terminal_send" else {}
            assert "human" in await call(reader, {"sessionId": resized, **args})
        await call("terminal_close", {"sessionId": resized})

        pid = (await call("pty_open", {"command": "echo one", "env": {"A": "1"}}))["sessionId"]
        await call("pty_send", {"id": pid, "data": "echo two"})
        await call("pty_tail", {"id": pid})
        await call("pty_close", {"id": pid})
        await call("pty_close", {"id": pid})
    # gdb_mi and ssh_* need a debugger and an ssh server; their own tests drive them.
    untested = {n for n in set(schemas) - seen if n != "gdb_mi" and not n.startswith("ssh_")}
    assert not untested, untested
