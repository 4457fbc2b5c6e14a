"""The ``job_output`` and ``job_kill`` tools over :class:`~.jobs.JobService`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .jobs import JobOutput, JobService
from .resultcap import cap_text
from .tools import Tool, ToolExec

__all__ = ["job_tools", "render_job_output"]

# JSON schemas of the two values: each tool's MCP ``outputSchema``.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "jobId": {"type": "string"},
        "status": {"enum": ["running", "completed", "failed", "killed"]},
        "output": {"type": "string"},
        "truncated": {"type": "boolean"},
        "result": {"type": "string"},
        "error": {"type": "string"},
    },
    "required": ["jobId", "status", "output", "truncated"],
}
KILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"jobId": {"type": "string"}, "killed": {"type": "boolean"}},
    "required": ["jobId", "killed"],
}


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

    async def output(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        result = await jobs().read(
            exec_.agent,
            args["jobId"],
            wait=args.get("wait", False),
            timeout_ms=args.get("timeoutMs"),
        )
        return result.to_wire()

    def render_output(_args: dict[str, Any], value: dict[str, Any]) -> str:
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

    async def kill(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        killed = await jobs().kill(exec_.agent, args["jobId"])
        return {"jobId": args["jobId"], "killed": killed}

    def render_kill(_args: dict[str, Any], value: dict[str, Any]) -> str:
        if value["killed"]:
            return (
                f"sent a stop request to {value['jobId']}; collect its final output with job_output"
            )
        return f"{value['jobId']} had already finished"

    def finalize(text: str) -> str:
        return cap_text(text, max_result_bytes)

    job_id = {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "description": "The job id, e.g. job-1.",
    }
    return [
        Tool(
            name="job_output",
            description=(
                "Read a background job's output. Each call returns only output that is new "
                "since the previous call, plus the job's status; when the job has finished, "
                "its final result is included once. Set wait=true to block until the job "
                "finishes (up to timeoutMs, default 30000)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "jobId": job_id,
                    "wait": {"type": "boolean", "description": "Wait for the job to finish first."},
                    "timeoutMs": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 600000,
                        "description": "Longest wait in milliseconds when wait=true.",
                    },
                },
                "required": ["jobId"],
                "additionalProperties": False,
            },
            execute=output,
            output_schema=OUTPUT_SCHEMA,
            render=render_output,
            finalize=finalize,
        ),
        Tool(
            name="job_kill",
            description=(
                "Stop a background job. For a terminal send this interrupts the foreground "
                "command with SIGINT; the session stays open. Output remains readable with "
                "job_output."
            ),
            parameters={
                "type": "object",
                "properties": {"jobId": job_id},
                "required": ["jobId"],
                "additionalProperties": False,
            },
            execute=kill,
            output_schema=KILL_SCHEMA,
            render=render_kill,
            finalize=finalize,
        ),
    ]
