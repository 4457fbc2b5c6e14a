"""Profile ``codex``: Codex's unified exec, ``exec_command`` and ``write_stdin`` (SPEC §30.1).

Models from OpenAI are trained on these two tools, so they are served with the names,
fields and result text Codex publishes, in ``openai/codex`` ``codex-rs/core``:
``src/tools/handlers/shell_spec.rs`` (the specs and ``unified_exec_output_schema``),
``src/unified_exec/mod.rs`` (yield bounds, 10,000 output tokens, 64 processes) and
``ExecCommandToolOutput::response_text`` (``Chunk ID``, ``Wall time``, ``Process exited
with code N`` or ``Process running with session ID N``, ``Original token count``,
``Output:``).

Underneath are this project's sessions: each ``exec_command`` opens a shell session
(``opened_by`` ``"codex"``) and types ``cmd`` into it; readiness decides when the call
returns and ``yield_time_ms`` is only the bound. When the shell's prompt came back the
command has exited, its exit code is reported and the session is closed; otherwise its
number (``pty-7`` is session 7) is the ``session_id`` ``write_stdin`` continues. The
registry authorizes every call, so another agent's ``session_id`` is refused
(``FOREIGN_SESSION``), as is one that is not open (``NO_SESSION``).
"""

from __future__ import annotations

import contextlib
import math
import secrets as random_ids
import shlex
import time
import weakref
from collections.abc import Callable
from typing import Annotated, NotRequired, Required, TypedDict

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import InvalidArgument, TerminalError
from dsh_terminal_core.kernel.resultcap import cap_text
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.registry import (
    MIN_REQUEST_BYTES,
    SendRequest,
    SendResult,
    SpawnRequest,
    TerminalSessionService,
)

from .args import MAX_SEND_CHARS
from .config import ToolTerminalConfig
from .profile_send import SHELL_TYPE, send_and_wait, truncate_middle
from .profile_send import exit_code as exit_code_of

__all__ = [
    "CODEX_TOOLS",
    "DEFAULT_EXEC_YIELD_MS",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_WRITE_YIELD_MS",
    "MAX_CODEX_SESSIONS",
    "OPENED_BY",
    "codex_tools",
]

CODEX_TOOLS = ("exec_command", "write_stdin")
#: What ``terminal_list`` and the records say opened these sessions.
OPENED_BY = "codex"
# codex-rs/core/src/unified_exec/mod.rs: MAX_UNIFIED_EXEC_PROCESSES and the yield bounds.
MAX_CODEX_SESSIONS = 64
MIN_YIELD_MS = 250
MAX_YIELD_MS = 30_000
MIN_EMPTY_POLL_MS = 5_000
MAX_EMPTY_POLL_MS = 300_000
DEFAULT_EXEC_YIELD_MS = 10_000
DEFAULT_WRITE_YIELD_MS = 250
DEFAULT_MAX_OUTPUT_TOKENS = 10_000
# Codex counts a token as four bytes of output (approx_token_count).
_BYTES_PER_TOKEN = 4
_TRUNCATED = "\n…{removed} bytes truncated…\n"
# Bytes of a result kept for its header lines.
_HEADER_ROOM = 256
_LIMIT_ADVICE = 'end one with write_stdin chars "\\u0003" (Ctrl-C) or by exiting its program'
_NO_SESSION_ADVICE = (
    "session ids come from results that say 'Process running with session ID N'; a "
    "session ends when its command exits"
)


class ExecCommandArgs(TypedDict, total=False):
    cmd: Required[Annotated[str, Text(1, MAX_SEND_CHARS), "Shell command to execute."]]
    workdir: Annotated[
        str,
        Text(1, 4096),
        "Optional working directory to run the command in; defaults to the turn cwd.",
    ]
    shell: Annotated[
        str, Text(1, 4096), "Shell binary to launch. Defaults to the user's default shell."
    ]
    login: Annotated[bool, "Whether to run the shell with -l/-i semantics. Defaults to true."]
    tty: Annotated[
        bool,
        "Whether to allocate a TTY for the command. Here every command runs in a PTY.",
    ]
    yield_time_ms: Annotated[
        float,
        Range(0),
        "Wait before yielding output. Defaults to 10000 ms; effective range is 250-30000 ms.",
    ]
    max_output_tokens: Annotated[
        float,
        Range(1),
        "Maximum number of tokens to return. Excess output will be truncated.",
    ]


class WriteStdinArgs(TypedDict, total=False):
    session_id: Required[
        Annotated[float, Range(0), "Identifier of the running unified exec session."]
    ]
    chars: Annotated[
        str,
        Text(0, MAX_SEND_CHARS),
        "Bytes to write to stdin. Defaults to empty, which polls without writing.",
    ]
    yield_time_ms: Annotated[
        float,
        Range(0),
        "Wait before yielding output. Non-empty writes default to 250 ms and cap at 30000 "
        "ms; empty polls wait 5000-300000 ms.",
    ]
    max_output_tokens: Annotated[
        float,
        Range(1),
        "Output token budget. Defaults to 10000 tokens; larger requests may be capped by policy.",
    ]


class ExecOutput(TypedDict):
    """``unified_exec_output_schema`` of Codex, plus facts of this project's: why the call
    returned, whether a hidden prompt waits, whether the process is one that redraws on a
    clock and never reads input, and the registry's name of the session (what its
    recording and the audit log say)."""

    chunk_id: Annotated[str, "Chunk identifier included when the response reports one."]
    wall_time_seconds: Annotated[float, "Elapsed wall time spent waiting for output in seconds."]
    exit_code: NotRequired[
        Annotated[int, "Process exit code when the command finished during this call."]
    ]
    session_id: NotRequired[
        Annotated[
            int,
            "Session identifier to pass to write_stdin when the process is still running.",
        ]
    ]
    original_token_count: Annotated[int, "Approximate token count before output truncation."]
    output: Annotated[str, "Command output text, possibly truncated."]
    wait_reason: Annotated[
        str, "Why the call returned (this project's readiness: stdin_read, timeout, ...)."
    ]
    input_hidden: Annotated[bool, "The terminal waits at a hidden (password) prompt."]
    periodic: NotRequired[
        Annotated[
            bool,
            "The process redraws on a clock and never reads input (watch, tail -f): it "
            "keeps running; poll with empty chars, or send Ctrl-C (\\u0003) to stop it.",
        ]
    ]
    sessionId: Annotated[str, "The registry's id of the session (pty-N), as records name it."]


def codex_tools(
    terminals: Callable[[], TerminalSessionService], config: ToolTerminalConfig
) -> list[Tool]:
    """Build ``exec_command`` and ``write_stdin``; services are resolved at call time."""
    terminals = kept_resolution(terminals)
    cap = config.max_result_bytes
    # Line cursors per agent and session: output written between two calls is shown by the
    # next. Kept no longer than the agent is.
    cursors: weakref.WeakKeyDictionary[Agent, dict[str, int]] = weakref.WeakKeyDictionary()

    def finalize(text: str) -> str:
        return cap_text(text, cap)

    def output_budget(max_output_tokens: float | None) -> int:
        tokens = DEFAULT_MAX_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens
        wanted = int(tokens) * _BYTES_PER_TOKEN
        return max(MIN_REQUEST_BYTES, min(wanted, cap - _HEADER_ROOM))

    def render_exec(_args: ExecCommandArgs, value: ExecOutput) -> str:
        return response_text(value)

    def render_write(_args: WriteStdinArgs, value: ExecOutput) -> str:
        return response_text(value)

    @tool(
        "exec_command",
        description=(
            "Runs a command in a PTY, returning output or a session ID for ongoing interaction."
        ),
        render=render_exec,
        finalize=finalize,
    )
    async def exec_command(args: ExecCommandArgs, exec_: ToolExec) -> ExecOutput:
        service = terminals()
        started = time.monotonic()
        _refuse_over_cap(service, exec_)
        yield_ms = _clamp(
            args.get("yield_time_ms"), DEFAULT_EXEC_YIELD_MS, MIN_YIELD_MS, MAX_YIELD_MS
        )
        budget = output_budget(args.get("max_output_tokens"))
        try:
            opened = await service.spawn(
                exec_.agent,
                SpawnRequest(type=SHELL_TYPE, cwd=args.get("workdir"), opened_by=OPENED_BY),
                exec_.cancel,
            )
        except TerminalError as exc:
            if exc.code == "SESSION_LIMIT":  # the registry's own, lower limit
                raise exc.advised(_LIMIT_ADVICE) from None
            raise
        session_id = opened.session_id
        try:
            _, cursor = service.complete_lines_since(exec_.agent, session_id, 0)
            request = SendRequest(
                text=_command_line(args),
                cancel=exec_.cancel,
                timeout_ms=yield_ms,
                max_bytes=budget,
            )
            result = await send_and_wait(service, exec_, session_id, request)
        except BaseException:
            with contextlib.suppress(TerminalError):
                await service.kill(exec_.agent, session_id, "exec_command failed")
            raise
        return await finish(exec_, session_id, cursor, [], result, started, budget)

    @tool(
        "write_stdin",
        description=(
            "Writes characters to an existing unified exec session and returns recent output."
        ),
        render=render_write,
        finalize=finalize,
    )
    async def write_stdin(args: WriteStdinArgs, exec_: ToolExec) -> ExecOutput:
        service = terminals()
        started = time.monotonic()
        session_id = _registry_id(args["session_id"])
        _authorize_codex(service, exec_, session_id)
        chars = args.get("chars", "")
        if chars:
            yield_ms = _clamp(
                args.get("yield_time_ms"), DEFAULT_WRITE_YIELD_MS, MIN_YIELD_MS, MAX_YIELD_MS
            )
        else:
            yield_ms = _clamp(
                args.get("yield_time_ms"), MIN_EMPTY_POLL_MS, MIN_EMPTY_POLL_MS, MAX_EMPTY_POLL_MS
            )
        budget = output_budget(args.get("max_output_tokens"))
        # Lines the command wrote since the previous call, before this send's own output.
        earlier, cursor = service.complete_lines_since(
            exec_.agent, session_id, cursors.get(exec_.agent, {}).get(session_id, 0)
        )
        request = SendRequest(
            text=chars, submit=False, cancel=exec_.cancel, timeout_ms=yield_ms, max_bytes=budget
        )
        result = await send_and_wait(service, exec_, session_id, request)
        return await finish(exec_, session_id, cursor, earlier, result, started, budget)

    async def finish(
        exec_: ToolExec,
        session_id: str,
        cursor: int,
        earlier: list[str],
        result: SendResult,
        started: float,
        budget: int,
    ) -> ExecOutput:
        """Shape ``result`` as Codex does; close the session once its command has exited."""
        service = terminals()
        text = "".join(f"{line}\n" for line in earlier) + result.viewport
        original_tokens = math.ceil(len(text.encode("utf-8", "surrogatepass")) / _BYTES_PER_TOKEN)
        output, _ = truncate_middle(text, budget, _TRUNCATED)
        value: ExecOutput = {
            "chunk_id": random_ids.token_hex(3),
            "wall_time_seconds": 0.0,
            "original_token_count": original_tokens,
            "output": output,
            "wait_reason": str(result.wait_reason),
            "input_hidden": result.input_hidden,
            "sessionId": session_id,
        }
        if result.periodic:
            value["periodic"] = True
        exit_code = exit_code_of(result)
        value["wall_time_seconds"] = time.monotonic() - started
        if exit_code is None:
            value["session_id"] = int(session_id.removeprefix("pty-"))
            _, after = service.complete_lines_since(exec_.agent, session_id, cursor)
            cursors.setdefault(exec_.agent, {})[session_id] = after
        else:
            value["exit_code"] = exit_code
            cursors.get(exec_.agent, {}).pop(session_id, None)
            with contextlib.suppress(TerminalError):  # a close already under way
                await service.kill(exec_.agent, session_id, "the command exited")
        return value

    return [exec_command, write_stdin]


def response_text(value: ExecOutput) -> str:
    """The text Codex gives its model (``ExecCommandToolOutput::response_text``)."""
    sections = [
        f"Chunk ID: {value['chunk_id']}",
        f"Wall time: {value['wall_time_seconds']:.4f} seconds",
    ]
    if "exit_code" in value:
        sections.append(f"Process exited with code {value['exit_code']}")
    if "session_id" in value:
        sections.append(f"Process running with session ID {value['session_id']}")
    sections.append(f"Original token count: {value['original_token_count']}")
    sections.append("Output:")
    sections.append(value["output"])
    return "\n".join(sections)


def _command_line(args: ExecCommandArgs) -> str:
    """What is typed into the session's shell for ``cmd``.

    Without ``shell`` the command runs in the session's own interactive bash, as typed.
    With one, it runs as Codex runs it, ``shell -lc cmd`` (``-c`` when ``login`` is false).
    """
    cmd = args["cmd"]
    shell = args.get("shell")
    if shell is None:
        return cmd
    flag = "-lc" if args.get("login", True) else "-c"
    return f"{shlex.quote(shell)} {flag} {shlex.quote(cmd)}"


def _clamp(value: float | None, default: int, low: int, high: int) -> int:
    chosen = default if value is None else int(value)
    return max(low, min(high, chosen))


def _registry_id(session_id: float) -> str:
    if session_id != int(session_id):
        raise InvalidArgument(f"session_id must be a whole number, got {session_id!r}")
    return f"pty-{int(session_id)}"


def _authorize_codex(service: TerminalSessionService, exec_: ToolExec, session_id: str) -> None:
    """``NO_SESSION``/``FOREIGN_SESSION`` from the registry, and ``NO_SESSION`` for a
    session of the caller's that ``exec_command`` did not open."""
    try:
        service.get_session(exec_.agent, session_id)
    except TerminalError as exc:
        raise exc.advised(_NO_SESSION_ADVICE) from None
    mine = {s.session_id: s for s in service.list(exec_.agent)}
    snapshot = mine.get(session_id)
    if snapshot is None or snapshot.opened_by != OPENED_BY:
        raise TerminalError(
            f"no exec_command session {session_id.removeprefix('pty-')}",
            "NO_SESSION",
            advice=_NO_SESSION_ADVICE,
        )


def _refuse_over_cap(service: TerminalSessionService, exec_: ToolExec) -> None:
    """``SESSION_LIMIT`` at Codex's 64 running sessions per agent (the registry's own
    ``max_sessions_per_owner`` still applies, and may be lower)."""
    running = sum(1 for s in service.list(exec_.agent) if s.opened_by == OPENED_BY)
    if running >= MAX_CODEX_SESSIONS:
        raise TerminalError(
            f"agent already has {MAX_CODEX_SESSIONS} running exec_command sessions (the "
            "limit); nothing was run",
            "SESSION_LIMIT",
            advice=_LIMIT_ADVICE,
        )
