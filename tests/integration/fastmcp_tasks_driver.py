"""Drive ``dsh-terminal mcp --http`` with FastMCP's own client half of the MCP tasks extension.

Why a separate process: FastMCP's tasks support ships in the companion package
``fastmcp-tasks`` (4.1.4), which pins an older FastMCP than this project's and pulls in
``pydocket``; ``scripts/install.sh --test`` puts it into ``.fastmcp-tasks/`` without
touching ``.venv``, and this script appends that directory to ``sys.path`` (so
``.venv``'s FastMCP 4.2 and everything else it has win). Importing ``fastmcp_tasks``
registers its ``TasksClientExtension`` on every FastMCP ``Client``, which then declares
``io.modelcontextprotocol/tasks``, resolves ``resultType: "task"`` by polling
``tasks/get`` and answers ``input_required`` through its elicitation handler with
``tasks/update``: a plain ``call_tool`` never learns the call was a task. Importing it in
the test process would turn this on for every other FastMCP test, hence the process.

Usage: ``python fastmcp_tasks_driver.py URL TOKEN TASKS_DIR``; the secret to type comes
in ``DSH_TEST_SECRET``. Prints one JSON object with what each call returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import urllib.parse
import urllib.request
from typing import Any


def _post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": content_type}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(answer.status)


async def main(url: str, token: str) -> dict[str, Any]:
    import fastmcp_tasks  # registers the client half of the extension
    import httpx2
    import mcp_types as types
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    methods: list[str] = []  # every JSON-RPC method the client sent, in order

    async def seen(request: httpx2.Request) -> None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            methods.append(json.loads(request.content)["method"])

    def http_client(**kwargs: Any) -> httpx2.AsyncClient:
        kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
        client = httpx2.AsyncClient(**kwargs)
        client.event_hooks["request"].append(seen)
        return client

    transport = StreamableHttpTransport(
        url, headers={"Authorization": f"Bearer {token}"}, httpx_client_factory=http_client
    )

    secret = os.environ["DSH_TEST_SECRET"]
    asked: list[dict[str, str]] = []
    helpers: list[asyncio.Task[None]] = []

    async def help_out(link: str) -> None:
        # The person: opens the control link, takes over, types, hands back.
        form = "application/json"
        await asyncio.to_thread(_post, link + "/control", b'{"action": "take"}', form)
        keys = json.dumps({"data": "echo from-person\r"}).encode()
        await asyncio.to_thread(_post, link + "/keys", keys, form)
        await asyncio.to_thread(_post, link + "/control", b'{"action": "hand_back"}', form)

    async def elicit(_message: str, _type: Any, params: Any, _ctx: Any) -> types.ElicitResult:
        asked.append({"mode": params.mode, "url": params.url, "message": params.message})
        if "/secret/" in params.url:
            body = urllib.parse.urlencode({"secret": secret}).encode()
            await asyncio.to_thread(_post, params.url, body, "application/x-www-form-urlencoded")
        else:
            helpers.append(asyncio.ensure_future(help_out(params.url)))
        return types.ElicitResult(action="accept")

    out: dict[str, Any] = {"fastmcp_tasks": fastmcp_tasks.__version__}
    async with Client(transport, elicitation_handler=elicit) as client:
        out["protocol"] = client.session.protocol_version
        opened = await client.call_tool("terminal_open", {"type": "shell"})
        sid = opened.structured_content["sessionId"]
        human = await client.call_tool(
            "terminal_ask_human",
            {"sessionId": sid, "reason": "log in to the VPN"},
            raise_on_error=False,
        )
        out["ask_human"] = human.structured_content
        await asyncio.gather(*helpers)
        prompt = "read -r -s -p 'Vault password: ' pw"
        waiting = await client.call_tool("terminal_send", {"sessionId": sid, "text": prompt})
        out["waiting"] = waiting.structured_content
        typed = await client.call_tool(
            "terminal_send",
            {"sessionId": sid, "secret": {"ask": "unlock the vault"}},
            raise_on_error=False,
        )
        out["typed"] = typed.structured_content or {"error": str(typed.content)}
        shown = await client.call_tool(
            "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
        )
        out["shown"] = shown.structured_content
        slow = await client.call_tool(
            "terminal_send", {"sessionId": sid, "text": "sleep 2; echo SLOW-DONE"}
        )
        out["slow"] = slow.structured_content
    out["asked"] = asked
    out["methods"] = methods
    return out


if __name__ == "__main__":
    sys.path.append(sys.argv[3])
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
