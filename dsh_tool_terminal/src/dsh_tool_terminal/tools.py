"""The model-facing ``terminal_*`` tools over ``ctx.terminals`` (and ``ctx.jobs``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from dsh_terminal_core.kernel.agents import Notice
from dsh_terminal_core.kernel.errors import InvalidArgument, TerminalError
from dsh_terminal_core.kernel.resultcap import cap_text
from dsh_terminal_core.kernel.tooldecl import derive_schema, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.registry import (
    MIN_REQUEST_BYTES,
    ReadRequest,
    SendRequest,
    SpawnRequest,
    TerminalSessionService,
    status_text,
)
from dsh_terminal_core.registry.linematch import LineMatch, compile_line_pattern
from dsh_terminal_core.secrets import Secret, SecretAsk, SecretsService

from . import render
from .args import (
    DEFAULT_TYPE,
    MAX_SEND_CHARS,
    CloseArgs,
    ForegroundSendArgs,
    ListArgs,
    OpenArgs,
    ReadArgs,
    ResizeArgs,
    SendArgs,
    SignalArgs,
)
from .config import ToolTerminalConfig
from .wire import (
    CloseValue,
    ListValue,
    OpenValue,
    ReadOutput,
    ReadValue,
    ResizeValue,
    SendOutput,
    SendValue,
    SignalValue,
    read_value,
    screen_read_value,
    send_value,
    snapshot_value,
    spawn_value,
)

__all__ = ["MAX_SEND_CHARS", "terminal_tools"]

# The values a person's time in control rides on, once (SPEC §22).
_Reported = TypeVar("_Reported", SendValue, ReadValue)

# What terminal_list says opened the sessions these tools open.
OPENED_BY = "terminal"
# Bytes of a result kept for what surrounds the output: the status line of a send, the
# page header and the "more" line of a read.
_METADATA_ROOM = 512


def terminal_tools(
    terminals: Callable[[], TerminalSessionService],
    jobs: Callable[[], Any | None],
    config: ToolTerminalConfig,
    secrets: Callable[[], SecretsService | None] = lambda: None,
) -> list[Tool]:
    """Build the tools; services are resolved at call time (they may be overridden)."""
    # Resolved again only when an override comes or goes (see kept_resolution).
    terminals = kept_resolution(terminals)
    jobs = kept_resolution(jobs)
    secrets = kept_resolution(secrets)
    cap = config.max_result_bytes
    # The service bounds the output itself (keeping head and tail) so that the rendered
    # result — output plus status or page lines — fits in the cap without a blind cut.
    output_bytes = max(MIN_REQUEST_BYTES, cap - _METADATA_ROOM)

    finalize = functools.partial(cap_text, max_bytes=cap)

    # -- terminal_open ------------------------------------------------------------------

    def render_open(_args: OpenArgs, value: OpenValue) -> str:
        return render.render_open(value, cap)

    @tool(
        "terminal_open",
        description=(
            "Open a persistent interactive terminal session (a real PTY) and return its "
            "sessionId. State such as the working directory, exported variables, an "
            "activated virtualenv and running interactive programs persists across "
            "terminal_send calls. Close sessions you no longer need with terminal_close."
        ),
        render=render_open,
        finalize=finalize,
    )
    async def terminal_open(args: OpenArgs, exec_: ToolExec) -> OpenValue:
        result = await terminals().spawn(
            exec_.agent,
            SpawnRequest(
                type=args.get("type", DEFAULT_TYPE),
                name=args.get("name"),
                cwd=args.get("cwd"),
                screen=args.get("screen", False),
                rows=args.get("rows"),
                cols=args.get("cols"),
                opened_by=OPENED_BY,
                world=args.get("world"),
            ),
            exec_.cancel,
        )
        return spawn_value(result)

    # -- terminal_send ------------------------------------------------------------------

    def render_send(args: SendArgs, value: SendValue) -> str:
        return render.with_human(value, render.render_send(value, cap, args["sessionId"]), cap)

    @tool(
        "terminal_send",
        description=(
            "Type text into a terminal session (Enter is pressed unless submit=false) and "
            "wait until the terminal waits for input again, the output goes quiet, or the "
            "time limit passes. Returns the output (viewport) and waitReason: only "
            "'stdin_read' means the terminal is waiting for input; 'inferred_idle' and "
            "'timeout' do not prove the command finished. exitCode is the shell's $? when "
            "the shell prompt came back. inputHidden=true means a hidden (password) prompt. "
            "With no text, keys or secret nothing is typed: the call only waits for the "
            "running command to settle."
        ),
        render=render_send,
        finalize=finalize,
    )
    async def terminal_send(args: SendArgs, exec_: ToolExec) -> SendOutput:
        background = args.get("run_in_background", False)
        if background and not config.enable_run_in_background:
            raise InvalidArgument("run_in_background is disabled for this harness")
        if "secret" in args:
            return await _send_secret(args, exec_)
        request_args = _send_request_args(args, output_bytes)
        service = terminals()
        _refuse_exited(service, exec_, args["sessionId"])
        if background:
            return _send_in_background(exec_, args["sessionId"], request_args)
        request = SendRequest(cancel=exec_.cancel, **request_args)
        op = service.start_send(exec_.agent, args["sessionId"], request)
        try:
            result = await op.result()
        except asyncio.CancelledError:
            await asyncio.shield(op.cancel())
            raise
        return _with_report(send_value(result), exec_, args["sessionId"], service)

    def _with_report(
        value: _Reported, exec_: ToolExec, session_id: str, service: TerminalSessionService
    ) -> _Reported:
        """Add, once, what a person did while they held the session (SPEC §22).

        A session closed while the send ran (it settled ``session_exit``) has no report
        left to give; its result stands as it is.
        """
        try:
            report = service.take_human_report(exec_.agent, session_id)
        except TerminalError:
            return value
        if report is not None:
            value["human"] = report.to_wire()
        return value

    if not config.enable_run_in_background:
        # Background sends disabled: run_in_background is not offered at all.
        terminal_send = attrs.evolve(
            terminal_send, parameters=derive_schema(ForegroundSendArgs, closed=True)
        )

    async def _send_secret(args: SendArgs, exec_: ToolExec) -> SendValue:
        spec = args["secret"]
        others: list[str] = sorted(
            k for k in ("text", "keys", "run_in_background", "waitFor") if k in args
        )
        if args.get("submit") is False:
            others.append("submit=false")
        if others:
            raise InvalidArgument(
                f"secret cannot be combined with {', '.join(others)}: the secret is typed "
                "alone, followed by Enter; nothing was sent"
            )
        if len(spec) != 1:
            raise InvalidArgument(
                'secret takes exactly one of name and ask, e.g. {"name": "db"} or '
                '{"ask": "the database password"}; nothing was sent'
            )
        session_id = args["sessionId"]
        if "name" in spec:
            secret = await _named_secret(spec["name"], exec_)
            _refuse_exited(terminals(), exec_, session_id)
        else:
            secret = await _asked_secret(session_id, spec["ask"], exec_)
        op = terminals().start_send(
            exec_.agent,
            session_id,
            SendRequest(
                text="",
                cancel=exec_.cancel,
                timeout_ms=args.get("timeoutMs"),
                max_bytes=output_bytes,
                secret=secret,
            ),
        )
        try:
            result = await op.result()
        except asyncio.CancelledError:
            await asyncio.shield(op.cancel())
            raise
        return send_value(result)

    async def _named_secret(name: str, exec_: ToolExec) -> Secret:
        service = secrets()
        found = await service.lookup(name, exec_.agent) if service is not None else None
        if found is None:
            where = (
                "no secret source has it (secrets plugin env/file, secret_source hooks)"
                if service is not None
                else "no secrets service is loaded (enable the 'secrets' plugin)"
            )
            raise TerminalError(f"no secret named {name!r}: {where}; nothing was sent", "NO_SECRET")
        return found

    async def _asked_secret(session_id: str, reason: str, exec_: ToolExec) -> Secret:
        ask = exec_.ask_secret
        if ask is None:
            raise TerminalError(
                "this client cannot ask its person for a secret (only an MCP client with "
                "URL-mode elicitation can); use a named secret; nothing was sent",
                "NO_SECRET",
            )
        # Before a person is asked for anything: an exited shell cannot take the secret.
        _refuse_exited(terminals(), exec_, session_id)
        # Ask only while the prompt is there; the write checks again afterwards.
        prompt = terminals().hidden_prompt(exec_.agent, session_id)
        return await ask(SecretAsk(session_id=session_id, prompt=prompt, reason=reason))

    def _send_in_background(
        exec_: ToolExec, session_id: str, request_args: dict[str, Any]
    ) -> SendValue:
        job_service = jobs()
        if job_service is None:
            raise TerminalError(
                "run_in_background needs a jobs service and none is loaded (enable the 'jobs' "
                "plugin of dsh-terminal-core); nothing was sent",
                "NO_JOBS_SERVICE",
            )
        op = terminals().start_send(exec_.agent, session_id, SendRequest(**request_args))
        started: list[str] = []  # the job's id, once it has one

        async def run(_handle: Any) -> str:
            result = await op.done
            value = send_value(result)
            if result.match is not None and exec_.agent.live:
                exec_.agent.notify(_matched_notice(session_id, started[0], result.match))
            return render.status_line(value)

        job = job_service.start(
            exec_.agent,
            title=f"terminal_send on {session_id}",
            run=run,
            kill=op.cancel,
            collect=op.read_output,
            max_output_bytes=cap,
            session_id=session_id,
        )
        started.append(job.id)
        return {"kind": "background", "jobId": job.id}

    # -- terminal_read ------------------------------------------------------------------

    def render_read(args: ReadArgs, value: ReadValue) -> str:
        if "screen" in value:
            text = render.render_screen_read(value, cap, args["sessionId"])
        else:
            text = render.render_read(value, cap, args["sessionId"])
        return render.with_human(value, text, cap)

    @tool(
        "terminal_read",
        description=(
            "Read a page of a session's scrollback: count lines starting at line offset, "
            "numbered from 1 as every result shows them (e.g. offset=101 count=5 returns "
            "lines 101-105). Use it for earlier output, or for the lines a send omitted."
        ),
        render=render_read,
        finalize=finalize,
    )
    async def terminal_read(args: ReadArgs, exec_: ToolExec) -> ReadOutput:
        service = terminals()
        if args.get("screen"):
            if "offset" in args or "count" in args:
                raise InvalidArgument("screen=true reads the screen; offset/count do not apply")
            screen = screen_read_value(service.read_screen(exec_.agent, args["sessionId"]))
            return _with_report(screen, exec_, args["sessionId"], service)
        result = service.read(
            exec_.agent,
            args["sessionId"],
            ReadRequest(
                offset=args.get("offset", 1),
                count=args.get("count", 500),
                max_bytes=output_bytes,
            ),
        )
        return _with_report(read_value(result), exec_, args["sessionId"], service)

    # -- terminal_signal ----------------------------------------------------------------

    def render_signal(args: SignalArgs, value: SignalValue) -> str:
        return render.render_signal(value, args["signal"], cap)

    @tool(
        "terminal_signal",
        description=(
            "Send a signal to the terminal's current foreground process group, e.g. SIGINT "
            "to interrupt a running command (like Ctrl-C). SIGKILL of the shell itself is "
            "refused; close the session instead."
        ),
        render=render_signal,
        finalize=finalize,
    )
    async def terminal_signal(args: SignalArgs, exec_: ToolExec) -> SignalValue:
        result = await terminals().signal(exec_.agent, args["sessionId"], args["signal"])
        return {"delivered": result.delivered, "targetPgid": result.target_pgid}

    # -- terminal_close -----------------------------------------------------------------

    def render_close(args: CloseArgs, value: CloseValue) -> str:
        return render.render_close(value, args["sessionId"], cap)

    @tool(
        "terminal_close",
        description=(
            "Close a terminal session and end every process it started. Returns "
            "closed=false when a close of that session was already in progress."
        ),
        render=render_close,
        finalize=finalize,
    )
    async def terminal_close(args: CloseArgs, exec_: ToolExec) -> CloseValue:
        closed = await terminals().kill(exec_.agent, args["sessionId"], "closed by terminal_close")
        return {"closed": closed}

    # -- terminal_resize ----------------------------------------------------------------

    def render_resize(args: ResizeArgs, value: ResizeValue) -> str:
        return cap_text(
            f"{args['sessionId']} is now {value['rows']} rows x {value['cols']} columns", cap
        )

    @tool(
        "terminal_resize",
        description=(
            "Change a session's window size; the running program is told (SIGWINCH) and "
            "redraws for it."
        ),
        render=render_resize,
        finalize=finalize,
    )
    async def terminal_resize(args: ResizeArgs, exec_: ToolExec) -> ResizeValue:
        size = terminals().resize(exec_.agent, args["sessionId"], args["rows"], args["cols"])
        return {"rows": size.rows, "cols": size.cols}

    # -- terminal_list ------------------------------------------------------------------

    def render_list(_args: ListArgs, value: ListValue) -> str:
        return render.render_list(value, cap)

    @tool(
        "terminal_list",
        description="List your open terminal sessions with their type, pid, status and cwd.",
        render=render_list,
        finalize=finalize,
    )
    async def terminal_list(args: ListArgs, exec_: ToolExec) -> ListValue:
        return {"sessions": [snapshot_value(s) for s in terminals().list(exec_.agent)]}

    return [
        terminal_open,
        terminal_send,
        terminal_read,
        terminal_signal,
        terminal_close,
        terminal_list,
        terminal_resize,
    ]


def _refuse_exited(terminals: TerminalSessionService, exec_: ToolExec, session_id: str) -> None:
    """``SESSION_EXITED`` for a send to a session whose shell has exited: nothing to type into.

    Checked before anything is typed or a job is started, as ``terminal_resize`` and
    ``terminal_signal`` refuse. A send already in flight when the shell dies still
    settles with ``waitReason`` ``session_exit``.
    """
    status = terminals.get_session(exec_.agent, session_id).status
    if status.kind == "exited":
        raise TerminalError(
            f"session {session_id} has {status_text(status.to_wire())}; nothing was sent",
            "SESSION_EXITED",
            advice=(
                "terminal_read still shows its output; terminal_close it and "
                "terminal_open a new one"
            ),
        )


def _matched_notice(session_id: str, job_id: str, match: LineMatch) -> Notice:
    """What the agent (and its MCP clients) hear when a background waitFor matched."""
    line = match.line if len(match.line) <= 200 else match.line[:200] + "…"
    return Notice(
        kind="matched",
        text=(
            f"background job {job_id} on {session_id}: line {match.line_number} matched "
            f"waitFor: {line!r}; the program keeps running"
        ),
        data={"sessionId": session_id, "jobId": job_id, "lineNumber": match.line_number},
    )


def _send_request_args(args: SendArgs, output_bytes: int) -> dict[str, Any]:
    """Exactly one of ``text`` and ``keys``; ``submit`` goes with ``text`` only.

    ``waitFor`` is compiled here, before anything is typed: a pattern that does not
    compile refuses the whole send.
    """
    common: dict[str, Any] = {"timeout_ms": args.get("timeoutMs"), "max_bytes": output_bytes}
    if "waitFor" in args:
        common["wait_for"] = compile_line_pattern(args["waitFor"], "waitFor")
    keys = args.get("keys")
    if keys is None:
        if "text" not in args:
            # Nothing to type: wait. Enter only when asked for (submit=true), since an
            # unasked Enter could answer a prompt such as "Proceed? [Y/n]".
            return {"text": "", "submit": args.get("submit", False), **common}
        return {"text": args["text"], "submit": args.get("submit", True), **common}
    if "text" in args or "submit" in args:
        raise InvalidArgument("send either text (with submit) or keys, not both")
    return {"text": "", "keys": tuple(keys), **common}
