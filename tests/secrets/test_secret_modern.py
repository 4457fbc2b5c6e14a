"""Asking the person for a secret with clients nobody here wrote, on both protocol eras.

On 2026-07-28 the URL-mode elicitation comes back as an ``input_required`` result and
the client retries with the person's answer; on 2025-11-25 it is a request from the
server, as before. Either way the client's elicitation handler plays the person: it
submits the page over HTTP (or in a real headless Chromium, once), declines or
cancels, and the secret goes from the page to the terminal only. Every result the
client received and the server's log are scanned for it afterwards.

The sealed ``requestState`` is driven by hand through the SDK session
(``allow_input_required=True``): it is opaque, bound to the call and to the identity,
works once, and carries neither the secret nor the page's address.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastmcp")

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from ..browser import headless_page, needs_chromium
from ..integration.mcp_clients import (
    COMBINATIONS,
    IDS,
    MODERN,
    SERVER_ARGS,
    Driver,
    connect,
    text_of,
    value_of,
)
from ..integration.test_mcp_http import TOKEN_A, TOKEN_B, http_server
from .support import digest, fill_secret_page
from .test_secret_mcp import SECRET, fetch, submit

TEST_BOUND_S = 120
PROMPT = "read -r -s -p 'Vault password: ' pw"

Combination = tuple[str, str, str]


class Person:
    """The elicitation handler: answers each ask with the next action, submitting on accept."""

    def __init__(self, *actions: str) -> None:
        self.actions = list(actions)
        self.urls: list[str] = []
        self.messages: list[str] = []

    async def __call__(self, params: types.ElicitRequestURLParams) -> types.ElicitResult:
        action = self.actions.pop(0)
        self.urls.append(params.url)
        self.messages.append(params.message)
        assert params.url.startswith("http://127.0.0.1:") and "/secret/" in params.url
        if action == "accept":
            page = await fetch(params.url)
            assert page.status_code == 200 and "Vault password:" in page.text
            sent = await submit(params.url, SECRET)
            assert sent.status_code == 200, sent.text
        return types.ElicitResult(action=action)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def client_for(
    combination: Combination, workspace: Path, person: Any, token: str = TOKEN_A
) -> AsyncIterator[tuple[Driver, Any]]:
    framework, transport, era = combination
    async with contextlib.AsyncExitStack() as stack:
        server = None
        url = None
        if transport == "http":
            server = await stack.enter_async_context(http_server(workspace))
            url = server.url
        driver = await stack.enter_async_context(
            connect(framework, transport, era, workspace, url=url, token=token, person=person)
        )
        yield driver, server


def look_only(sid: str) -> dict[str, Any]:
    """A send that types nothing: it reports whether the prompt still waits."""
    return {"sessionId": sid, "text": "", "submit": False, "timeoutMs": 300}


async def at_prompt(driver: Driver) -> str:
    sid = str(value_of(await driver.call("terminal_open", {"type": "shell"}))["sessionId"])
    waiting = value_of(await driver.call("terminal_send", {"sessionId": sid, "text": PROMPT}))
    assert waiting["inputHidden"] is True, waiting
    return sid


@pytest.mark.parametrize("combination", COMBINATIONS, ids=IDS)
async def test_decline_cancel_then_accept_with_the_page_submitted(
    combination: Combination, tmp_path: Path
) -> None:
    person = Person("decline", "cancel", "accept")
    seen: list[str] = []
    with anyio.fail_after(TEST_BOUND_S):
        async with client_for(combination, tmp_path, person) as (driver, server):
            assert driver.protocol_version == combination[2]
            sid = await at_prompt(driver)
            ask = {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            for refused in ("declined", "cancelled"):
                result = await driver.call("terminal_send", ask)
                seen.append(repr(result))
                assert result.is_error and text_of(result).startswith("error [SECRET_DECLINED]")
                assert f"the person {refused} the request" in text_of(result)
                gone = await submit(person.urls[-1], "late")
                assert gone.status_code == 410  # withdrawn: nothing can be typed through it
            typed = await driver.call("terminal_send", ask)
            seen.append(repr(typed))
            value = value_of(typed)
            assert value["waitReason"] == "stdin_read", value
            shown = value_of(
                await driver.call(
                    "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
                )
            )
            assert digest(SECRET) in shown["viewport"]
            read = await driver.call("terminal_read", {"sessionId": sid, "count": 1000})
            seen.append(repr(read))
            await driver.call("terminal_close", {"sessionId": sid})
        seen.append(server.log if server is not None else (tmp_path / "server.log").read_text())
    assert len(set(person.urls)) == 3
    assert all("Vault password:" in message for message in person.messages)
    for text in seen:
        assert SECRET not in text


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_client_without_url_elicitation_gets_no_secret(
    transport: str, tmp_path: Path
) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with client_for(("sdk", transport, MODERN), tmp_path, None) as (driver, _):
            sid = await at_prompt(driver)
            result = await driver.call("terminal_send", {"sessionId": sid, "secret": {"ask": "x"}})
            assert result.is_error and text_of(result).startswith("error [NO_SECRET]")
            assert "URL-mode elicitation" in text_of(result)


async def first_round(driver: Driver, args: dict[str, Any]) -> types.InputRequiredResult:
    first = await driver.session.call_tool("terminal_send", args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    return first


async def test_the_request_state_is_sealed_bound_and_works_once(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            connect(
                "sdk", "http", MODERN, tmp_path, url=server.url, token=TOKEN_A, person=Person()
            ) as a,
            connect(
                "sdk", "http", MODERN, tmp_path, url=server.url, token=TOKEN_B, person=Person()
            ) as b,
        ):
            sid = await at_prompt(a)
            args = {"sessionId": sid, "secret": {"ask": "sealed state"}}
            first = await first_round(a, args)
            assert first.input_requests is not None and set(first.input_requests) == {"secret"}
            elicit = first.input_requests["secret"]
            assert isinstance(elicit, types.ElicitRequest)
            assert isinstance(elicit.params, types.ElicitRequestURLParams)
            url = elicit.params.url
            state = first.request_state
            assert state is not None and state.startswith("v1.")
            # Opaque: neither the page's address nor its token can be read from it.
            token = url.rsplit("/", 1)[1]
            assert token not in state and "ask" not in state and "{" not in state
            answer = {"secret": types.ElicitResult(action="accept")}

            async def retry(driver: Driver, **changes: Any) -> Any:
                params: dict[str, Any] = {"input_responses": answer, "request_state": state}
                params.update(changes)
                arguments = params.pop("arguments", args)
                return await driver.session.call_tool(
                    "terminal_send", arguments, allow_input_required=True, **params
                )

            tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
            for refused in (
                retry(a, request_state=tampered),  # altered
                retry(b),  # another identity's
                retry(a, arguments={**args, "secret": {"ask": "other reason"}}),  # another call
            ):
                with pytest.raises(MCPError) as invalid:
                    await refused
                assert invalid.value.code == types.INVALID_PARAMS
                assert "requestState" in invalid.value.message
            # None of those consumed the ask: its own caller still completes it.
            assert (await submit(url, SECRET)).status_code == 200
            typed = await retry(a)
            assert isinstance(typed, types.CallToolResult)
            assert value_of(typed)["waitReason"] == "stdin_read"
            shown = value_of(
                await a.call("terminal_send", {"sessionId": sid, "text": 'echo "[$pw]"'})
            )
            assert shown["viewport"] == f"[{SECRET}]\n"
            # Used once: at the next prompt the same state is refused and types nothing.
            value_of(await a.call("terminal_send", {"sessionId": sid, "text": PROMPT}))
            again = await retry(a)
            assert isinstance(again, types.CallToolResult) and again.is_error
            assert text_of(again).startswith("error [NO_SECRET]"), text_of(again)
            still = value_of(await a.call("terminal_send", look_only(sid)))
            assert still["inputHidden"] is True
            await a.call("terminal_close", {"sessionId": sid})
        assert SECRET not in server.log


async def test_a_retry_without_the_persons_answer_sends_nothing(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with client_for(("sdk", "stdio", MODERN), tmp_path, Person()) as (driver, _):
            sid = await at_prompt(driver)
            args = {"sessionId": sid, "secret": {"ask": "no answer"}}
            first = await first_round(driver, args)
            retried = await driver.session.call_tool(
                "terminal_send", args, request_state=first.request_state
            )
            assert retried.is_error and text_of(retried).startswith("error [NO_SECRET]")
            assert "without the person's answer" in text_of(retried)
            # The ask is spent, and the prompt still waits for its secret.
            still = value_of(await driver.call("terminal_send", look_only(sid)))
            assert still["inputHidden"] is True


@needs_chromium
async def test_headless_chromium_fills_in_the_page_on_2026(tmp_path: Path) -> None:
    shown: list[tuple[str, str]] = []

    async def person(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        async with headless_page() as page:
            shown.append(await fill_secret_page(page, params.url, SECRET))
        return types.ElicitResult(action="accept")

    params = StdioServerParameters(
        command=sys.executable, args=[*SERVER_ARGS, "--workspace", str(tmp_path)], cwd=tmp_path
    )
    with anyio.fail_after(TEST_BOUND_S), (tmp_path / "server.log").open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode=MODERN, elicitation_callback=person
        ) as client:
            driver = Driver(client, "sdk")
            sid = await at_prompt(driver)
            typed = await driver.call(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            )
            assert not typed.is_error, text_of(typed)
            check = value_of(
                await driver.call(
                    "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
                )
            )
            assert digest(SECRET) in check["viewport"]
    ((before, after),) = shown
    assert f"Secret for terminal session {sid}" in before and "unlock the vault" in before
    assert f"goes to terminal session {sid}" in after
    assert SECRET not in (tmp_path / "server.log").read_text()
