"""Owner-scoped background jobs with incremental output.

A job wraps background work (e.g. a terminal send with ``run_in_background``). Its output
is read incrementally: each read returns only what arrived since the previous read, and
unread output is capped per job (the newest bytes are kept). When a job ends, a
``job_finished`` notice goes to its owner (data: ``jobId``, ``status`` and, for a job
on a terminal session, ``sessionId``) so the next turn, and any client listening, learns
about it without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, NotRequired, TypedDict

import attrs

from .agents import Agent, Notice
from .errors import DshError, InvalidArgument
from .resultcap import MAX_RESULT_BYTES
from .textbounds import TailBuffer

__all__ = ["Job", "JobError", "JobHandle", "JobOutput", "JobService"]

JobStatus = Literal["running", "completed", "failed", "killed"]
#: The kind of the notice a job's end sends its owner.
JOB_FINISHED = "job_finished"
KillHook = Callable[[], Awaitable[None] | None]


class JobOutputValue(TypedDict):
    """A :class:`JobOutput` on the wire: the ``job_output`` tool's value."""

    jobId: str
    status: JobStatus
    output: str
    truncated: bool
    result: NotRequired[str]
    error: NotRequired[str]


class JobError(DshError):
    """A job operation was refused (``NO_JOB``, ``FOREIGN_JOB``, ``JOB_LIMIT``...)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)


@attrs.frozen(kw_only=True)
class JobOutput:
    """One incremental read: output new since the last read, and where the job stands."""

    job_id: str
    title: str
    status: JobStatus
    output: str
    truncated: bool
    result: str | None = None
    error: str | None = None

    def to_wire(self) -> JobOutputValue:
        wire: JobOutputValue = {
            "jobId": self.job_id,
            "status": self.status,
            "output": self.output,
            "truncated": self.truncated,
        }
        if self.result is not None:
            wire["result"] = self.result
        if self.error is not None:
            wire["error"] = self.error
        return wire


class JobHandle:
    """Given to a job's body: append output as it is produced."""

    def __init__(self, job: Job) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        return self._job.id

    def write(self, text: str) -> None:
        self._job.append(text)


class Job:
    """One background job; created by :meth:`JobService.start`."""

    def __init__(
        self,
        job_id: str,
        owner: Agent,
        title: str,
        cap: int,
        collect: Callable[[], str] | None,
        kill: KillHook | None,
        session_id: str | None = None,
    ) -> None:
        self.id = job_id
        self.owner = owner
        self.title = title
        self.session_id = session_id
        self.status: JobStatus = "running"
        self.result: str | None = None
        self.error: str | None = None
        self._cap = cap
        self._collect = collect
        self._kill = kill
        # The newest ``cap`` bytes not yet taken; older output is dropped (truncated).
        self._output = TailBuffer(cap)
        self._result_delivered = False
        self._kill_requested = False
        self.finished = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def append(self, text: str) -> None:
        self._output.append(text)

    def _pull(self) -> None:
        if self._collect is not None and self.status == "running":
            self.append(self._collect())

    def take(self) -> JobOutput:
        """Return what is new since the previous take and reset the cursor."""
        self._pull()
        text = self._output.text()
        truncated = self._output.truncated
        self._output.clear()
        result = None
        if self.status != "running" and not self._result_delivered:
            result = self.result
            self._result_delivered = True
        return JobOutput(
            job_id=self.id,
            title=self.title,
            status=self.status,
            output=text,
            truncated=truncated,
            result=result,
            error=self.error if result is not None or self.error else None,
        )


class JobService:
    """Runs background jobs per owner; ids are ``job-1``, ``job-2``, ... service-wide."""

    def __init__(self, max_output_bytes: int = MAX_RESULT_BYTES) -> None:
        self._cap = max_output_bytes
        self._jobs: dict[str, Job] = {}
        self._counter = 0
        self._owners_with_effect: weakref.WeakSet[Agent] = weakref.WeakSet()
        self._disposing = False

    def start(
        self,
        owner: Agent,
        *,
        title: str,
        run: Callable[[JobHandle], Awaitable[str | None]],
        kill: KillHook | None = None,
        collect: Callable[[], str] | None = None,
        max_output_bytes: int | None = None,
        session_id: str | None = None,
    ) -> Job:
        """Start ``run`` as a background job of ``owner`` and return the job at once.

        ``run`` gets a :class:`JobHandle` to write output; its return value is the job's
        final result. ``collect`` is pulled on every read for output produced elsewhere.
        ``kill`` is how :meth:`kill` stops the job; without it the task is cancelled.
        ``session_id`` names the terminal session the job runs on, so the notice of its
        end can say where (a client woken by it knows which terminal to look at).
        """
        if self._disposing:
            raise JobError("the job service is shutting down", "SERVICE_DISPOSING")
        if not owner.live:
            raise JobError(f"agent {owner.id!r} is disposed", "OWNER_NOT_LIVE")
        if owner not in self._owners_with_effect:
            self._owners_with_effect.add(owner)
            owner.on_dispose(lambda: self.dispose_owner(owner))
        self._counter += 1
        job = Job(
            f"job-{self._counter}",
            owner,
            title,
            max_output_bytes or self._cap,
            collect,
            kill,
            session_id,
        )
        self._jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, run), name=job.id)
        return job

    async def _run(self, job: Job, run: Callable[[JobHandle], Awaitable[str | None]]) -> None:
        try:
            result = await run(JobHandle(job))
            job._pull()
            job.result = result
            job.status = "killed" if job._kill_requested else "completed"
        except asyncio.CancelledError:
            job.status = "killed"
            job.result = job.result or "job was cancelled"
        except Exception as exc:
            job._pull()
            job.status = "killed" if job._kill_requested else "failed"
            job.error = (
                f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, DshError)
                else (f"[{exc.code}] {exc.message}")
            )
        finally:
            job._collect = None
            job.finished.set()
            if job.owner.live:
                data: dict[str, object] = {"jobId": job.id, "status": job.status}
                if job.session_id is not None:
                    data["sessionId"] = job.session_id
                job.owner.notify(
                    Notice(
                        kind=JOB_FINISHED,
                        text=f"background job {job.id} ({job.title}) {job.status}; "
                        f"collect its output with job_output",
                        data=data,
                    )
                )

    def get(self, owner: Agent, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError(f"no job {job_id!r}", "NO_JOB")
        if job.owner is not owner:
            raise JobError(f"job {job_id!r} belongs to another agent", "FOREIGN_JOB")
        return job

    async def read(
        self, owner: Agent, job_id: str, *, wait: bool = False, timeout_ms: int | None = None
    ) -> JobOutput:
        """New output of the job; with ``wait``, first wait for it to end (bounded).

        A read that reports the job's end withdraws the owner's queued ``job_finished``
        notice of this job: the reader has the news, and the next result would only
        repeat it.
        """
        job = self.get(owner, job_id)
        if timeout_ms is not None and timeout_ms < 0:
            raise InvalidArgument("timeout_ms must be >= 0")
        if wait and job.status == "running":
            timeout = (timeout_ms if timeout_ms is not None else 30000) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.finished.wait(), timeout)
        output = job.take()
        if output.status != "running":
            owner.withdraw_notices(
                lambda n: n.kind == JOB_FINISHED and n.data.get("jobId") == job.id
            )
        return output

    async def kill(self, owner: Agent, job_id: str) -> bool:
        """Ask the job to stop; True when it was running. Its output stays readable."""
        job = self.get(owner, job_id)
        if job.status != "running":
            return False
        job._kill_requested = True
        if job._kill is not None:
            outcome = job._kill()
            if inspect.isawaitable(outcome):
                await outcome
        elif job.task is not None:
            job.task.cancel()
        return True

    def list(self, owner: Agent) -> list[Job]:
        return [job for job in self._jobs.values() if job.owner is owner]

    async def dispose_owner(self, owner: Agent) -> None:
        """Cancel the owner's running jobs and forget all of them."""
        jobs = [job for job in self._jobs.values() if job.owner is owner]
        await self._cancel(jobs)
        for job in jobs:
            self._jobs.pop(job.id, None)
        self._owners_with_effect.discard(owner)

    async def dispose(self) -> None:
        self._disposing = True
        await self._cancel(list(self._jobs.values()))

    @staticmethod
    async def _cancel(jobs: Sequence[Job]) -> None:
        tasks = [job.task for job in jobs if job.task is not None and not job.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
