"""Profile ``claude``: Claude Code's ``Bash``, ``TaskOutput`` and ``TaskStop`` (SPEC §30.1).

Models from Anthropic are trained on these tools, so they are served with the input
fields Claude Code 2.1.276 publishes in its ``sdk-tools.d.ts`` (``BashInput``,
``TaskOutputInput``, ``TaskStopInput``; ``BashOutput`` and ``TaskStopOutput`` for the
values), over this project's sessions:

- ``Bash`` runs in one persistent shell per agent, as Claude Code's does: the working
  directory and exported variables persist from call to call. The call returns when the
  command's prompt is back (its exit code is reported) or when the terminal provably
  waits for input (a REPL, a hidden password prompt): readiness decides, and ``timeout``
  is the bound; a mere silence keeps the call waiting, since it proves nothing. At the
  bound the command is interrupted (Ctrl-C), ``interrupted`` says so.
- ``Bash`` with ``run_in_background`` runs the command in a session of its own as a job
  of the jobs service; its id is the ``task_id`` of ``TaskOutput`` and ``TaskStop`` (and
  of ``job_output``/``job_kill``). ``TaskStop`` is a real Ctrl-C.

Sessions, jobs and their authorization are the registry's and the jobs service's, so
another agent's task is refused (``FOREIGN_JOB``), as is an unknown one (``NO_JOB``).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable
from typing import Annotated, Literal, NotRequired, Required, TypedDict

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import InvalidArgument, TerminalError
from dsh_terminal_core.kernel.jobs import JobService
from dsh_terminal_core.kernel.resultcap import cap_text
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.registry import (
    MIN_REQUEST_BYTES,
    SendRequest,
    SpawnRequest,
    TerminalSessionService,
    WaitReason,
)

from .args import MAX_SEND_CHARS
from .claude_tasks import BackgroundRun, BackgroundTask, finished_within
from .config import ToolTerminalConfig
from .profile_send import SHELL_TYPE, send_and_wait, truncate_middle
from .profile_send import exit_code as exit_code_of

__all__ = [
    "CLAUDE_TOOLS",
    "DEFAULT_BASH_TIMEOUT_MS",
    "MAX_BASH_TIMEOUT_MS",
    "OPENED_BY",
    "claude_tools",
]

CLAUDE_TOOLS = ("Bash", "TaskOutput", "TaskStop")
OPENED_BY = "claude"
# Claude Code's Bash: 2 minutes by default, at most 10; TaskOutput waits 30 s by default.
DEFAULT_BASH_TIMEOUT_MS = 120_000
MAX_BASH_TIMEOUT_MS = 600_000
DEFAULT_TASK_TIMEOUT_MS = 30_000
# How long an interrupted command gets to bring its prompt back before the call returns.
_SETTLE_AFTER_INTERRUPT_MS = 2_000
# How long TaskStop's Ctrl-C is given before the task's session is closed instead.
_STOP_GRACE_S = 3.0
_TRUNCATED = "\n... [{removed} bytes truncated] ...\n"
_METADATA_ROOM = 512
_SESSION_ID = "The registry's id of the session the command ran in (pty-N), as records name it."


class BashInput(TypedDict, total=False):
    command: Required[Annotated[str, Text(1, MAX_SEND_CHARS), "The command to execute"]]
    timeout: Annotated[
        int, Range(1, MAX_BASH_TIMEOUT_MS), "Optional timeout in milliseconds (max 600000)"
    ]
    description: Annotated[
        str, Text(0, 4096), "Clear, concise description of what this command does in 5-10 words"
    ]
    run_in_background: Annotated[
        bool,
        "Set to true to run this command in the background. Use TaskOutput to read the "
        "output later.",
    ]


class BashOutput(TypedDict):
    """``BashOutput`` of ``sdk-tools.d.ts`` (the fields this project fills), plus this
    project's ``exitCode``, ``inputHidden``, ``periodic`` and ``sessionId``."""

    stdout: str
    stderr: str
    interrupted: bool
    backgroundTaskId: NotRequired[str]
    returnCodeInterpretation: NotRequired[str]
    exitCode: NotRequired[
        Annotated[int | None, "The command's exit status; null while it has not exited."]
    ]
    inputHidden: NotRequired[Annotated[bool, "The shell waits at a hidden (password) prompt."]]
    periodic: NotRequired[
        Annotated[
            bool,
            "The command redrew on a clock and never read input (watch, tail -f), so it "
            "was interrupted instead of waiting out the timeout; run it in the background "
            "to keep it running.",
        ]
    ]
    sessionId: Annotated[str, _SESSION_ID]


class TaskOutputInput(TypedDict, total=False):
    task_id: Required[Annotated[str, Text(1, 64), "The task ID to get output from"]]
    block: Annotated[bool, "Whether to wait for completion"]
    timeout: Annotated[int, Range(0, MAX_BASH_TIMEOUT_MS), "Max wait time in ms"]


class TaskInfo(TypedDict):
    task_id: str
    task_type: str
    status: str
    description: str
    output: str
    exitCode: int | None


class TaskOutputOutput(TypedDict):
    retrieval_status: Literal["success", "timeout", "not_ready"]
    task: TaskInfo
    sessionId: NotRequired[Annotated[str, _SESSION_ID]]


class TaskStopInput(TypedDict, total=False):
    task_id: Annotated[str, Text(1, 64), "The ID of the background task to stop"]
    shell_id: Annotated[str, Text(1, 64), "Deprecated: use task_id instead"]


class TaskStopOutput(TypedDict):
    message: str
    task_id: str
    task_type: str
    command: NotRequired[str]
    sessionId: NotRequired[Annotated[str, _SESSION_ID]]


def claude_tools(
    terminals: Callable[[], TerminalSessionService],
    jobs: Callable[[], JobService | None],
    config: ToolTerminalConfig,
) -> list[Tool]:
    """Build ``Bash``, ``TaskOutput`` and ``TaskStop``; services are resolved at call time."""
    terminals = kept_resolution(terminals)
    jobs = kept_resolution(jobs)
    cap = config.max_result_bytes
    budget = max(MIN_REQUEST_BYTES, cap - _METADATA_ROOM)
    shells: weakref.WeakKeyDictionary[Agent, str] = weakref.WeakKeyDictionary()
    # What TaskOutput reports beyond the job, per agent, kept no longer than the agent is.
    tasks: weakref.WeakKeyDictionary[Agent, dict[str, BackgroundTask]] = weakref.WeakKeyDictionary()

    def finalize(text: str) -> str:
        return cap_text(text, cap)

    async def persistent_shell(exec_: ToolExec) -> str:
        """The agent's one shell: reused while it runs, opened anew once it ended."""
        service = terminals()
        session_id = shells.get(exec_.agent)
        if session_id is not None:
            alive = {s.session_id: s for s in service.list(exec_.agent)}.get(session_id)
            if alive is not None and alive.status.kind == "running":
                return session_id
            with contextlib.suppress(TerminalError):
                await service.kill(exec_.agent, session_id, "its shell ended")
        session_id = await open_shell(service, exec_)
        shells[exec_.agent] = session_id
        return session_id

    async def open_shell(service: TerminalSessionService, exec_: ToolExec) -> str:
        try:
            opened = await service.spawn(
                exec_.agent, SpawnRequest(type=SHELL_TYPE, opened_by=OPENED_BY), exec_.cancel
            )
        except TerminalError as exc:
            if exc.code == "SESSION_LIMIT":
                raise exc.advised(
                    "stop a background task you no longer need with TaskStop"
                ) from None
            raise
        return opened.session_id

    def render_bash(_args: BashInput, value: BashOutput) -> str:
        return bash_text(value)

    @tool(
        "Bash",
        description=(
            "Executes a given bash command in a persistent shell session with optional "
            "timeout; the working directory and environment persist between commands. "
            "Returns when the command finishes or the terminal waits for input (a REPL, "
            "a password prompt). Use run_in_background for long-running commands and read "
            "them with TaskOutput."
        ),
        render=render_bash,
        finalize=finalize,
    )
    async def bash(args: BashInput, exec_: ToolExec) -> BashOutput:
        if args.get("run_in_background", False):
            return await start_background(args, exec_)
        service = terminals()
        session_id = await persistent_shell(exec_)
        limit_ms = args.get("timeout", DEFAULT_BASH_TIMEOUT_MS)
        deadline = time.monotonic() + limit_ms / 1000
        text = args["command"]
        parts: list[str] = []
        while True:
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            request = SendRequest(
                text=text,
                submit=bool(text),
                cancel=exec_.cancel,
                timeout_ms=remaining,
                max_bytes=budget,
            )
            result = await send_and_wait(service, exec_, session_id, request)
            parts.append(result.viewport)
            text = ""
            # Silence proves nothing: keep waiting, within the bound, as Claude Code waits.
            # A program redrawing on a clock (periodic) never finishes and never reads the
            # next command: waiting out the bound would only cost the time.
            if (
                result.wait_reason != WaitReason.INFERRED_IDLE
                or result.periodic
                or time.monotonic() >= deadline
            ):
                break
        # A caller's cancellation already interrupted the command (Ctrl-C) and settled it.
        interrupted = exec_.cancel.cancelled
        periodic = result.periodic
        timed_out = not periodic and result.wait_reason in (
            WaitReason.TIMEOUT,
            WaitReason.INFERRED_IDLE,
        )
        if timed_out or periodic:
            interrupted = True
            await service.signal(exec_.agent, session_id, "SIGINT")
            settle = SendRequest(
                text="",
                submit=False,
                cancel=exec_.cancel,
                timeout_ms=_SETTLE_AFTER_INTERRUPT_MS,
                max_bytes=budget,
            )
            result = await send_and_wait(service, exec_, session_id, settle)
            parts.append(result.viewport)
        stdout, _ = truncate_middle("".join(parts), budget, _TRUNCATED)
        value: BashOutput = {
            "stdout": stdout,
            "stderr": "",
            "interrupted": interrupted,
            "sessionId": session_id,
        }
        exit_code = exit_code_of(result)
        value["exitCode"] = exit_code
        if result.input_hidden:
            value["inputHidden"] = True
        if result.wait_reason == WaitReason.SESSION_EXIT:
            shells.pop(exec_.agent, None)
            with contextlib.suppress(TerminalError):
                await service.kill(exec_.agent, session_id, "its shell exited")
            value["returnCodeInterpretation"] = (
                "the shell exited; the next command starts a new one"
            )
        elif periodic:
            value["periodic"] = True
            value["returnCodeInterpretation"] = (
                "Command redraws on a clock and never reads input (periodic), so it was "
                "interrupted; run it with run_in_background to keep it running"
            )
        elif timed_out:
            value["returnCodeInterpretation"] = f"Command timed out after {limit_ms} ms"
        elif interrupted:
            value["returnCodeInterpretation"] = "Command was interrupted: the call was cancelled"
        elif exit_code is None:
            value["returnCodeInterpretation"] = (
                "waiting at a hidden (password) prompt"
                if result.input_hidden
                else "the command is waiting for input; the next command is typed into it"
            )
        return value

    async def start_background(args: BashInput, exec_: ToolExec) -> BashOutput:
        service = terminals()
        job_service = jobs()
        if job_service is None:
            raise TerminalError(
                "run_in_background needs a jobs service and none is loaded (enable the 'jobs' "
                "plugin of dsh-terminal-core); nothing was run",
                "NO_JOBS_SERVICE",
            )
        session_id = await open_shell(service, exec_)
        task = BackgroundTask(
            command=args["command"],
            description=args.get("description", args["command"][:80]),
            session_id=session_id,
        )
        runner = BackgroundRun(service, exec_.agent, session_id, task, budget)
        try:
            runner.start()
            job = job_service.start(
                exec_.agent,
                title=f"Bash: {task.description}",
                run=runner.run,
                kill=runner.stop,
                collect=runner.collect,
                max_output_bytes=cap,
                session_id=session_id,
            )
        except BaseException:
            with contextlib.suppress(TerminalError):
                await service.kill(exec_.agent, session_id, "background start failed")
            raise
        tasks.setdefault(exec_.agent, {})[job.id] = task
        return {
            "stdout": "",
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": job.id,
            "sessionId": session_id,
        }

    def render_task_output(_args: TaskOutputInput, value: TaskOutputOutput) -> str:
        return task_output_text(value)

    @tool(
        "TaskOutput",
        description=(
            "Retrieves output from a running or completed background task (a Bash command "
            "run with run_in_background). block=true (the default) waits for it to finish, "
            "up to timeout ms; output is what is new since the previous read."
        ),
        render=render_task_output,
        finalize=finalize,
    )
    async def task_output(args: TaskOutputInput, exec_: ToolExec) -> TaskOutputOutput:
        job_service = _needs_jobs(jobs())
        task_id = args["task_id"]
        block = args.get("block", True)
        read = await job_service.read(
            exec_.agent,
            task_id,
            wait=block,
            timeout_ms=args.get("timeout", DEFAULT_TASK_TIMEOUT_MS),
        )
        task = tasks.get(exec_.agent, {}).get(task_id)
        status = read.status
        exit_code = task.exit_code if task is not None else None
        if status == "completed" and exit_code not in (None, 0):
            status = "failed"
        running = read.status == "running"
        retrieval: Literal["success", "timeout", "not_ready"] = (
            "success" if not running else ("timeout" if block else "not_ready")
        )
        output = read.output if read.error is None else f"{read.output}{read.error}\n"
        value: TaskOutputOutput = {
            "retrieval_status": retrieval,
            "task": {
                "task_id": task_id,
                "task_type": "local_bash",
                "status": status,
                "description": task.description if task is not None else read.title,
                "output": output,
                "exitCode": exit_code,
            },
        }
        if task is not None:
            value["sessionId"] = task.session_id
        return value

    def render_task_stop(_args: TaskStopInput, value: TaskStopOutput) -> str:
        return value["message"]

    @tool(
        "TaskStop",
        description=(
            "Stops a running background task by its ID (an interrupt, Ctrl-C, to its "
            "command). Returns a success or failure status."
        ),
        render=render_task_stop,
        finalize=finalize,
    )
    async def task_stop(args: TaskStopInput, exec_: ToolExec) -> TaskStopOutput:
        job_service = _needs_jobs(jobs())
        task_id = args.get("task_id") or args.get("shell_id")
        if task_id is None:
            raise InvalidArgument("TaskStop needs task_id (the ID Bash run_in_background gave)")
        job = job_service.get(exec_.agent, task_id)
        if not await job_service.kill(exec_.agent, task_id):
            raise TerminalError(
                f"task {task_id} is not running (it {job.status})", "INVALID_ARGUMENT"
            )
        task = tasks.get(exec_.agent, {}).get(task_id)
        if not await finished_within(job.finished, _STOP_GRACE_S) and task is not None:
            # Ctrl-C did not stop it (SIGINT ignored): closing the session ends its tree.
            with contextlib.suppress(TerminalError):
                await terminals().kill(exec_.agent, task.session_id, "TaskStop: Ctrl-C ignored")
        await job.finished.wait()
        value: TaskStopOutput = {
            "message": f"Successfully stopped task: {task_id}"
            + (f" ({task.command})" if task is not None else ""),
            "task_id": task_id,
            "task_type": "local_bash",
        }
        if task is not None:
            value["command"] = task.command
            value["sessionId"] = task.session_id
        return value

    return [bash, task_output, task_stop]


def _needs_jobs(service: JobService | None) -> JobService:
    if service is None:
        raise TerminalError(
            "background tasks need a jobs service and none is loaded (enable the 'jobs' "
            "plugin of dsh-terminal-core)",
            "NO_JOBS_SERVICE",
        )
    return service


def bash_text(value: BashOutput) -> str:
    """The text a model reads: the output, with ``Exit code N`` first when it failed."""
    lines: list[str] = []
    code = value.get("exitCode")
    if code not in (None, 0):
        lines.append(f"Exit code {code}")
    body = value["stdout"].rstrip("\n")
    if body:
        lines.append(body)
    task = value.get("backgroundTaskId")
    if task is not None:
        lines.append(
            f"Command running in background with ID: {task}. Read its output with "
            f"TaskOutput task_id={task}."
        )
    note = value.get("returnCodeInterpretation")
    if note is not None:
        lines.append(f"<{note}>")
    return "\n".join(lines) if lines else "(no output)"


def task_output_text(value: TaskOutputOutput) -> str:
    """TaskOutput as tagged lines, one per field, the output last."""
    task = value["task"]
    lines = [
        f"<retrieval_status>{value['retrieval_status']}</retrieval_status>",
        f"<task_id>{task['task_id']}</task_id>",
        f"<task_type>{task['task_type']}</task_type>",
        f"<status>{task['status']}</status>",
    ]
    if task["exitCode"] is not None:
        lines.append(f"<exit_code>{task['exitCode']}</exit_code>")
    if task["output"]:
        lines.append(f"<output>\n{task['output'].rstrip(chr(10))}\n</output>")
    return "\n".join(lines)
