"""The ``job_output`` and ``job_kill`` tools over :class:`~.jobs.JobService`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, NotRequired, TypedDict

from .jobs import JobOutput, JobOutputValue, JobService
from .resultcap import cap_text
from .tooldecl import Range, Text, tool
from .tools import Tool, ToolExec

__all__ = ["JobKilled", "JobOutputArgs", "job_tools", "render_job_output"]

JobId = Annotated[str, Text(1, 64), "The job id, e.g. job-1."]


class JobOutputArgs(TypedDict):
    jobId: JobId
    wait: NotRequired[Annotated[bool, "Wait for the job to finish first."]]
    timeoutMs: NotRequired[
        Annotated[int, Range(0, 600000), "Longest wait in milliseconds when wait=true."]
    ]


class JobKillArgs(TypedDict):
    jobId: JobId


class JobKilled(TypedDict):
    jobId: str
    killed: bool


def render_job_output(out: JobOutput) -> str:
    """Compact model-facing text: a header line, the new output, then the final result."""
    header = f"[{out.job_id} {out.status}{' · output truncated' if out.truncated else ''}]"
    parts = [header]
    if out.output:
        parts.append(out.output.rstrip("\n"))
    if out.result:
        parts.append(out.result)
    if out.error:
        parts.append(f"error: {out.error}")
    if out.status == "running" and not out.output:
        parts.append("(no new output yet; the job is still running)")
    return "\n".join(parts)


def job_tools(jobs: Callable[[], JobService], max_result_bytes: int) -> list[Tool]:
    """Build the two job tools; ``jobs`` resolves the service at call time."""

    def finalize(text: str) -> str:
        return cap_text(text, max_result_bytes)

    def render_output(_args: JobOutputArgs, value: JobOutputValue) -> str:
        return render_job_output(
            JobOutput(
                job_id=value["jobId"],
                title="",
                status=value["status"],
                output=value["output"],
                truncated=value["truncated"],
                result=value.get("result"),
                error=value.get("error"),
            )
        )

    @tool(
        "job_output",
        description=(
            "Read a background job's output. Each call returns only output that is new "
            "since the previous call, plus the job's status; when the job has finished, "
            "its final result is included once. Set wait=true to block until the job "
            "finishes (up to timeoutMs, default 30000)."
        ),
        render=render_output,
        finalize=finalize,
    )
    async def job_output(args: JobOutputArgs, exec_: ToolExec) -> JobOutputValue:
        result = await jobs().read(
            exec_.agent,
            args["jobId"],
            wait=args.get("wait", False),
            timeout_ms=args.get("timeoutMs"),
        )
        return result.to_wire()

    def render_kill(_args: JobKillArgs, value: JobKilled) -> str:
        if value["killed"]:
            return (
                f"sent a stop request to {value['jobId']}; collect its final output with job_output"
            )
        return f"{value['jobId']} had already finished"

    @tool(
        "job_kill",
        description=(
            "Stop a background job. For a terminal send this interrupts the foreground "
            "command with SIGINT; the session stays open. Output remains readable with "
            "job_output."
        ),
        render=render_kill,
        finalize=finalize,
    )
    async def job_kill(args: JobKillArgs, exec_: ToolExec) -> JobKilled:
        killed = await jobs().kill(exec_.agent, args["jobId"])
        return {"jobId": args["jobId"], "killed": killed}

    return [job_output, job_kill]
