"""The four model-facing tools: ``ssh_open``, ``ssh_run``, ``ssh_interrupt``, ``ssh_close``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, NotRequired, TypedDict

from dsh_terminal_core import MAX_RESULT_BYTES, cap_text
from dsh_terminal_core.kernel.errors import ErrorCode, InvalidArgument, TerminalError
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.secrets import Secret, SecretsService

from .askpass import LoginSecrets
from .options import Destination
from .service import SshService
from .session import RunValue

__all__ = ["ssh_tools"]

DEFAULT_TIMEOUT_MS = 30000

SessionId = Annotated[str, Text(1, 64)]
SecretName = Annotated[str, Text(1, 256)]


class OpenArgs(TypedDict):
    host: Annotated[str, Text(1, 255)]
    port: NotRequired[Annotated[int, Range(1, 65535)]]
    user: NotRequired[Annotated[str, Text(1, 64)]]
    identityFile: NotRequired[Annotated[str, Text(1, 4096)]]
    name: NotRequired[Annotated[str, Text(1, 64)]]
    passwordSecret: NotRequired[
        Annotated[SecretName, "Name of the secret holding the login password."]
    ]
    passphraseSecret: NotRequired[
        Annotated[SecretName, "Name of the secret holding identityFile's passphrase."]
    ]


class Opened(TypedDict):
    sessionId: str
    host: str
    port: int
    user: str | None
    banner: str
    name: NotRequired[str]


class RunArgs(TypedDict):
    sessionId: SessionId
    command: Annotated[str, Text(max_length=65536)]
    timeoutMs: NotRequired[Annotated[int, Range(1, 3600000)]]


class SessionArgs(TypedDict):
    sessionId: SessionId


class Interrupted(TypedDict):
    delivered: bool
    exitCode: NotRequired[int]


class Closed(TypedDict):
    closed: bool


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

    @tool(
        "ssh_open",
        description=(
            "Log in to a host over ssh (OpenSSH client, key authentication) and keep a "
            "remote shell open for ssh_run. A second open to the same host reuses the "
            "connection. Fails fast with SSH_CONNECT, SSH_HOST_KEY or SSH_AUTH. A "
            "password or key passphrase is answered only from a named secret "
            "(passwordSecret, passphraseSecret) you never see; nothing is guessed."
        ),
        finalize=_finalize,
    )
    async def ssh_open(args: OpenArgs, exec_: ToolExec) -> Opened:
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
        value: Opened = {
            "sessionId": session.session_id,
            "host": destination.host,
            "port": destination.port,
            "user": session.user,
            "banner": session.banner,
        }
        if session.name is not None:
            value["name"] = session.name
        return value

    def render_run(_args: RunArgs, value: RunValue) -> str:
        reason = value["waitReason"]
        status = f"[exit {value['exitCode']}]" if reason == "stdin_read" else f"[{reason}]"
        return cap_text(f"{value['output']}\n{status}", MAX_RESULT_BYTES, keep="tail")

    @tool(
        "ssh_run",
        description=(
            "Run a shell command in an open ssh session and return its output and exit "
            "code once it finishes (waitReason stdin_read). Working directory and "
            "variables persist between runs. At timeoutMs it returns waitReason "
            "timeout while the command keeps running: ssh_interrupt stops it, or "
            "ssh_run with command '' keeps waiting. session_exit: the connection ended."
        ),
        render=render_run,
        finalize=_finalize,
    )
    async def ssh_run(args: RunArgs, exec_: ToolExec) -> RunValue:
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

    @tool(
        "ssh_interrupt",
        description=(
            "Send Ctrl-C to the remote terminal of an ssh session, stopping the command "
            "that runs there (the connection stays). delivered is false when no command "
            "was running."
        ),
        finalize=_finalize,
    )
    async def ssh_interrupt(args: SessionArgs, exec_: ToolExec) -> Interrupted:
        session = service().get(exec_.agent, args["sessionId"])
        delivered, exit_code = await session.interrupt()
        value: Interrupted = {"delivered": delivered}
        if exit_code is not None:
            value["exitCode"] = exit_code
        return value

    @tool(
        "ssh_close",
        description=(
            "Close an ssh session and end its remote shell; closed is false if it was already gone."
        ),
        finalize=_finalize,
    )
    async def ssh_close(args: SessionArgs, exec_: ToolExec) -> Closed:
        return {"closed": await service().close(exec_.agent, args["sessionId"])}

    return [ssh_open, ssh_run, ssh_interrupt, ssh_close]
