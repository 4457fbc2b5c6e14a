"""The four model-facing tools: ``ssh_open``, ``ssh_run``, ``ssh_interrupt``, ``ssh_close``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from dsh_terminal_core import MAX_RESULT_BYTES, cap_text
from dsh_terminal_core.kernel.errors import ErrorCode, InvalidArgument, TerminalError
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.secrets import Secret, SecretsService

from .askpass import LoginSecrets
from .options import Destination
from .service import SshService

__all__ = ["ssh_tools"]

DEFAULT_TIMEOUT_MS = 30000

_SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 64}

# JSON schemas of the four values: each tool's MCP ``outputSchema``.
OPEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessionId": {"type": "string"},
        "host": {"type": "string"},
        "port": {"type": "integer"},
        "user": {"type": ["string", "null"]},
        "banner": {"type": "string"},
        "name": {"type": "string"},
    },
    "required": ["sessionId", "host", "port", "user", "banner"],
}
RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "output": {"type": "string"},
        "exitCode": {"type": ["integer", "null"]},
        "waitReason": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["output", "exitCode", "waitReason", "truncated"],
}
INTERRUPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"delivered": {"type": "boolean"}, "exitCode": {"type": "integer"}},
    "required": ["delivered"],
}
CLOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"closed": {"type": "boolean"}},
    "required": ["closed"],
}


def _finalize(text: str) -> str:
    return cap_text(text, MAX_RESULT_BYTES)


def ssh_tools(
    service: Callable[[], SshService],
    secrets: Callable[[], SecretsService | None] = lambda: None,
) -> list[Tool]:
    """Build the tools over the service (resolved per call, so overrides take effect)."""

    async def secret(name: str | None, what: str, exec_: ToolExec) -> Secret | None:
        if name is None:
            return None
        source = secrets()
        found = await source.lookup(name, exec_.agent) if source is not None else None
        if found is None:
            raise TerminalError(
                f"no secret named {name!r} for the {what}: "
                + (
                    "no secret source has it"
                    if source is not None
                    else "no secrets service is loaded (enable the 'secrets' plugin)"
                ),
                ErrorCode.NO_SECRET,
            )
        return found

    async def open_(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        # Named secrets are resolved before anything else: an unknown name is NO_SECRET.
        login = LoginSecrets(
            password=await secret(args.get("passwordSecret"), "login password", exec_),
            passphrase=await secret(args.get("passphraseSecret"), "key passphrase", exec_),
        )
        try:
            destination = Destination(
                host=args["host"],
                port=args.get("port", 22),
                user=args.get("user"),
                identity_file=args.get("identityFile"),
            )
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from exc
        session = await service().open(
            exec_.agent, destination, args.get("name"), exec_.cancel, login or None
        )
        value: dict[str, Any] = {
            "sessionId": session.session_id,
            "host": destination.host,
            "port": destination.port,
            "user": session.user,
            "banner": session.banner,
        }
        if session.name is not None:
            value["name"] = session.name
        return value

    async def run(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        session = service().get(exec_.agent, args["sessionId"])
        exec_.cancel.raise_if_cancelled()
        # A cancelled call stops waiting; the command keeps running remotely, as after a
        # timeout (ssh_interrupt stops it). The ssh client itself is never signalled.
        work = asyncio.ensure_future(
            session.run(args["command"], args.get("timeoutMs", DEFAULT_TIMEOUT_MS))
        )

        def stop(_reason: BaseException) -> None:
            work.cancel()

        remove = exec_.cancel.on_cancel(stop)
        try:
            result = await work
        except asyncio.CancelledError:
            exec_.cancel.raise_if_cancelled()
            raise
        finally:
            remove()
        return result.to_wire()

    def render_run(_args: dict[str, Any], value: dict[str, Any]) -> str:
        reason = value["waitReason"]
        status = f"[exit {value['exitCode']}]" if reason == "stdin_read" else f"[{reason}]"
        return cap_text(f"{value['output']}\n{status}", MAX_RESULT_BYTES, keep="tail")

    async def interrupt(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        session = service().get(exec_.agent, args["sessionId"])
        delivered, exit_code = await session.interrupt()
        value: dict[str, Any] = {"delivered": delivered}
        if exit_code is not None:
            value["exitCode"] = exit_code
        return value

    async def close(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        return {"closed": await service().close(exec_.agent, args["sessionId"])}

    return [
        Tool(
            name="ssh_open",
            description=(
                "Log in to a host over ssh (OpenSSH client, key authentication) and keep a "
                "remote shell open for ssh_run. A second open to the same host reuses the "
                "connection. Fails fast with SSH_CONNECT, SSH_HOST_KEY or SSH_AUTH. A "
                "password or key passphrase is answered only from a named secret "
                "(passwordSecret, passphraseSecret) you never see; nothing is guessed."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "host": {"type": "string", "minLength": 1, "maxLength": 255},
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "user": {"type": "string", "minLength": 1, "maxLength": 64},
                    "identityFile": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "name": {"type": "string", "minLength": 1, "maxLength": 64},
                    "passwordSecret": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 256,
                        "description": "Name of the secret holding the login password.",
                    },
                    "passphraseSecret": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 256,
                        "description": "Name of the secret holding identityFile's passphrase.",
                    },
                },
                "required": ["host"],
                "additionalProperties": False,
            },
            execute=open_,
            output_schema=OPEN_SCHEMA,
            finalize=_finalize,
        ),
        Tool(
            name="ssh_run",
            description=(
                "Run a shell command in an open ssh session and return its output and exit "
                "code once it finishes (waitReason stdin_read). Working directory and "
                "variables persist between runs. At timeoutMs it returns waitReason "
                "timeout while the command keeps running: ssh_interrupt stops it, or "
                "ssh_run with command '' keeps waiting. session_exit: the connection ended."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "sessionId": _SESSION_ID,
                    "command": {"type": "string", "maxLength": 65536},
                    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 3600000},
                },
                "required": ["sessionId", "command"],
                "additionalProperties": False,
            },
            execute=run,
            output_schema=RUN_SCHEMA,
            render=render_run,
            finalize=_finalize,
        ),
        Tool(
            name="ssh_interrupt",
            description=(
                "Send Ctrl-C to the remote terminal of an ssh session, stopping the command "
                "that runs there (the connection stays). delivered is false when no command "
                "was running."
            ),
            parameters={
                "type": "object",
                "properties": {"sessionId": _SESSION_ID},
                "required": ["sessionId"],
                "additionalProperties": False,
            },
            execute=interrupt,
            output_schema=INTERRUPT_SCHEMA,
            finalize=_finalize,
        ),
        Tool(
            name="ssh_close",
            description=(
                "Close an ssh session and end its remote shell; closed is false if it was "
                "already gone."
            ),
            parameters={
                "type": "object",
                "properties": {"sessionId": _SESSION_ID},
                "required": ["sessionId"],
                "additionalProperties": False,
            },
            execute=close,
            output_schema=CLOSE_SCHEMA,
            finalize=_finalize,
        ),
    ]
