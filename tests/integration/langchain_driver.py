"""Drive ``dsh-terminal mcp`` with LangChain's ``langchain-mcp-adapters``, as its users would.

Why a separate script: the adapters (0.3.x) pin ``mcp<2`` and our ``[mcp]`` extra needs
``mcp>=2``, so they cannot share an environment. This script runs under
``.venv-langchain/bin/python`` (built by ``scripts/install.sh --test``), imports nothing
of ours, and talks to our server as a separate process — over stdio (the adapter starts
the server) or over streamable HTTP (the test starts it). It prints one JSON object on
stdout that ``test_mcp_langchain.py`` asserts on.

Usage: ``python langchain_driver.py '<json config>'`` where the config is
``{"scenario": "session" | "stateless", "transport": "stdio" | "http", ...}``:
stdio adds ``command`` (argv of the server), ``cwd`` and ``env``; http adds ``url`` and
``token``.

Leaks are proved from here as well as from the test: this process snapshots every
descendant it has (the stdio server, its fork server, shells, the background job) while
the sessions are open, and after the client has closed it waits until each one is gone
and reports any that is not. Only the standard library reads ``/proc``, so the
environment needs nothing beyond the adapters.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import version
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

SERVER = "dsh"
# Everything here takes well under a second per step; these only bound a hang.
CALL_TIMEOUT_S = 30.0
GONE_TIMEOUT_S = 10.0

ProcessId = tuple[int, int]  # (pid, start time in clock ticks): a pid is not reused under it


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process from /proc, or None if it is gone or a zombie.

    The command name sits in parentheses and may hold spaces, so fields are split after
    the last ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat") as file:
            data = file.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> set[ProcessId]:
    """Every live process under ``root``, each with its start time."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            parents.setdefault(stat[0], []).append((int(name), stat[1]))
    found: set[ProcessId] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child[0])
    return found


def still_running(processes: set[ProcessId]) -> list[ProcessId]:
    """Those of ``processes`` alive now (same pid and start time, not a zombie)."""
    alive = []
    for pid, started in sorted(processes):
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            alive.append((pid, started))
    return alive


async def wait_gone(processes: set[ProcessId]) -> list[ProcessId]:
    """Wait (bounded) until every one of ``processes`` has ended; return those that did not."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (alive := still_running(processes)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return alive


def connection(config: dict[str, Any]) -> dict[str, Any]:
    """The adapter's connection dict for our server, as a user would write it.

    Over stdio the environment is passed whole: the adapter (through the SDK) otherwise
    gives the server only HOME, PATH, SHELL, TERM, USER and LOGNAME, and the suite's run
    marker must reach the shells for its leak check to count them.
    """
    if config["transport"] == "stdio":
        command = config["command"]
        return {
            "transport": "stdio",
            "command": command[0],
            "args": command[1:],
            "cwd": config["cwd"],
            "env": config["env"],
        }
    return {
        "transport": "streamable_http",
        "url": config["url"],
        "headers": {"Authorization": f"Bearer {config['token']}"},
    }


def schema_report(tools: list[BaseTool]) -> dict[str, dict[str, Any]]:
    """How LangChain converts each tool's input schema, and what strict mode does to it.

    ``load_mcp_tools`` keeps the MCP ``inputSchema`` as the tool's ``args_schema`` dict;
    a model sees it through ``tool_call_schema`` and ``convert_to_openai_tool``. Both are
    run for every tool and any exception is recorded rather than raised, so one schema
    the adapter cannot convert is reported by name. ``strict=True`` (what OpenAI strict
    function calling gets) makes every property required and every object closed; the
    optional properties it forces and the map-valued properties it empties are listed,
    since they change what a strict model can send.
    """
    report: dict[str, dict[str, Any]] = {}
    for tool in tools:
        entry: dict[str, Any] = {"error": None, "strictError": None}
        try:
            call_schema = tool.tool_call_schema
            assert isinstance(call_schema, dict), type(call_schema)
            converted = convert_to_openai_tool(tool)
            entry["parameters"] = converted["function"]["parameters"]
            entry["args"] = sorted(tool.args)
        except Exception as error:  # every failure is the finding, whatever its type
            entry["error"] = f"{type(error).__name__}: {error}"
        try:
            strict = convert_to_openai_tool(tool, strict=True)["function"]["parameters"]
            schema = tool.args_schema
            assert isinstance(schema, dict)
            properties: dict[str, Any] = schema.get("properties", {})
            required = set(schema.get("required", []))
            entry["strictForcesOptional"] = sorted(set(properties) - required)
            entry["strictClosesMaps"] = sorted(
                name
                for name, prop in properties.items()
                if isinstance(prop.get("additionalProperties"), dict)
                and strict["properties"][name].get("additionalProperties") is False
            )
        except Exception as error:
            entry["strictError"] = f"{type(error).__name__}: {error}"
        report[tool.name] = entry
    return report


class Caller:
    """Calls LangChain tools the way an agent's tool node does, and records each step."""

    def __init__(self, tools: list[BaseTool]) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.steps: list[dict[str, Any]] = []
        # Every process under this one after each call: the server, its shells, the job.
        self.seen: set[ProcessId] = descendants(os.getpid())

    async def __call__(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Invoke ``name`` with a model's tool call; return status, text and structured result.

        A tool call (not bare arguments) is what an agent passes, and it is what makes the
        tool return a ``ToolMessage`` carrying the error status and the MCP
        ``structuredContent`` as its artifact.
        """
        call = {"type": "tool_call", "id": f"call-{len(self.steps) + 1}", "name": name}
        message = await asyncio.wait_for(
            self.tools[name].ainvoke({**call, "args": args}), CALL_TIMEOUT_S
        )
        assert isinstance(message, ToolMessage), type(message)
        artifact = message.artifact
        step = {
            "tool": name,
            "args": args,
            "status": message.status,
            "text": _text_of(message.content),
            "structured": artifact.get("structured_content") if artifact else None,
        }
        self.steps.append(step)
        self.seen |= descendants(os.getpid())
        return step


def _text_of(content: Any) -> str:
    """The text of a ToolMessage's content: a string, or LangChain content blocks."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


async def flow(call: Caller) -> None:
    """The tour every client gets: open, send, read, list, a background job, close."""
    opened = await call("terminal_open", {"type": "shell", "name": "lc"})
    sid = (opened["structured"] or {}).get("sessionId")
    if sid is None:
        return
    await call("terminal_send", {"sessionId": sid, "text": "echo hi"})
    await call("terminal_read", {"sessionId": sid})
    await call("terminal_list", {})
    started = await call(
        "terminal_send",
        {"sessionId": sid, "text": "sleep 0.3; echo bg-done", "run_in_background": True},
    )
    job = (started["structured"] or {}).get("jobId")
    if job is not None:
        await call("job_output", {"jobId": job, "wait": True, "timeoutMs": 20000})
    # A foreign id is a tool error the model can read, not a crash of the run.
    await call("terminal_send", {"sessionId": "pty-999", "text": "true"})
    await call("terminal_close", {"sessionId": sid})


async def short_flow(call: Caller) -> None:
    """Open, send, list, close: enough to show whether a terminal outlives one call."""
    opened = await call("terminal_open", {"type": "shell", "name": "lc"})
    sid = (opened["structured"] or {}).get("sessionId")
    if sid is None:
        return
    await call("terminal_send", {"sessionId": sid, "text": "echo hi"})
    await call("terminal_list", {})
    await call("terminal_close", {"sessionId": sid})


@asynccontextmanager
async def tools_for(
    client: MultiServerMCPClient, scenario: str, result: dict[str, Any]
) -> AsyncIterator[list[BaseTool]]:
    """The tools for ``scenario``: one long-lived session, or the adapter's default.

    ``session``: ``client.session()`` holds one MCP session (over stdio: one server
    process) for every call, which stateful tools need. ``stateless``: ``get_tools()``
    opens a new session for each call — over stdio a new server per call, so a terminal
    opened by one call is gone before the next.
    """
    if scenario == "stateless":
        yield await client.get_tools(server_name=SERVER)
        return
    session_cm: AbstractAsyncContextManager[Any] = client.session(SERVER, auto_initialize=False)
    async with session_cm as session:
        initialized = await session.initialize()
        result["protocolVersion"] = initialized.protocolVersion
        result["serverName"] = initialized.serverInfo.name
        yield await load_mcp_tools(session, server_name=SERVER)


async def run(config: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario and return what happened, processes included."""
    result: dict[str, Any] = {
        "versions": {
            "python": ".".join(map(str, sys.version_info[:3])),
            **{name: version(name) for name in ("langchain-mcp-adapters", "langchain-core", "mcp")},
        },
    }
    client = MultiServerMCPClient({SERVER: connection(config)})  # type: ignore[dict-item]
    call: Caller | None = None
    started = time.monotonic()
    async with tools_for(client, config["scenario"], result) as tools:
        result["loadSeconds"] = round(time.monotonic() - started, 3)
        result["tools"] = [tool.name for tool in tools]
        result["schemas"] = schema_report(tools)
        call = Caller(tools)
        started = time.monotonic()
        try:
            await (flow if config["scenario"] == "session" else short_flow)(call)
        finally:
            result["steps"] = call.steps
            result["flowSeconds"] = round(time.monotonic() - started, 3)
    seen = call.seen if call is not None else set()
    result["processesSeen"] = sorted(seen)
    result["leftRunning"] = await wait_gone(seen)
    return result


def main() -> int:
    """Print the scenario's JSON result; on failure, the traceback as JSON (exit 1)."""
    config = json.loads(sys.argv[1])
    try:
        result = asyncio.run(run(config))
    except BaseException:
        print(json.dumps({"crash": traceback.format_exc()}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
