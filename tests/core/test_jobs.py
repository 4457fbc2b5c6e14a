"""Jobs: incremental output, bounded waits, kill, ownership, notices, output cap."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.jobs import JobError, JobHandle, JobService


async def test_output_is_incremental_and_result_arrives_once() -> None:
    jobs = JobService()
    owner = Agent("a")
    step = asyncio.Event()

    async def run(handle: JobHandle) -> str:
        handle.write("one\n")
        await step.wait()
        handle.write("two\n")
        return "finished with 0"

    job = jobs.start(owner, title="demo", run=run)
    assert job.id == "job-1"
    await asyncio.sleep(0)
    first = await jobs.read(owner, job.id)
    assert (first.status, first.output, first.result) == ("running", "one\n", None)
    assert (await jobs.read(owner, job.id)).output == ""
    step.set()
    done = await jobs.read(owner, job.id, wait=True, timeout_ms=2000)
    assert (done.status, done.output, done.result) == ("completed", "two\n", "finished with 0")
    again = await jobs.read(owner, job.id)
    assert (again.output, again.result) == ("", None)
    # The read that reported the end withdrew the end notice: the reader had the news.
    assert owner.drain_notices() == []
    await owner.dispose()


async def test_wait_is_bounded_by_timeout() -> None:
    jobs = JobService()
    owner = Agent("a")
    never = asyncio.Event()

    async def run(handle: JobHandle) -> str:
        await never.wait()
        return "x"

    job = jobs.start(owner, title="stuck", run=run)
    loop = asyncio.get_running_loop()
    started = loop.time()
    out = await jobs.read(owner, job.id, wait=True, timeout_ms=50)
    assert out.status == "running"
    assert loop.time() - started < 2
    await owner.dispose()
    assert job.task is not None and job.task.done()


async def test_kill_uses_the_kill_hook_and_marks_killed() -> None:
    jobs = JobService()
    owner = Agent("a")
    stop = asyncio.Event()
    hook_calls: list[int] = []

    async def run(handle: JobHandle) -> str:
        await stop.wait()
        handle.write("interrupted\n")
        return "stopped"

    async def kill() -> None:
        hook_calls.append(1)
        stop.set()

    job = jobs.start(owner, title="t", run=run, kill=kill)
    assert await jobs.kill(owner, job.id) is True
    out = await jobs.read(owner, job.id, wait=True, timeout_ms=2000)
    assert (out.status, out.output, out.result) == ("killed", "interrupted\n", "stopped")
    assert hook_calls == [1]
    assert await jobs.kill(owner, job.id) is False


async def test_kill_without_hook_cancels_the_task() -> None:
    jobs = JobService()
    owner = Agent("a")

    async def run(handle: JobHandle) -> str:
        await asyncio.Event().wait()
        return "never"

    job = jobs.start(owner, title="t", run=run)
    await asyncio.sleep(0)
    await jobs.kill(owner, job.id)
    out = await jobs.read(owner, job.id, wait=True, timeout_ms=2000)
    assert out.status == "killed"


async def test_foreign_and_unknown_job_ids_are_refused() -> None:
    jobs = JobService()
    owner, other = Agent("a"), Agent("b")

    async def run(handle: JobHandle) -> str:
        handle.write("secret")
        return "done"

    job = jobs.start(owner, title="t", run=run)
    await asyncio.sleep(0)
    for call in (jobs.read(other, job.id), jobs.kill(other, job.id)):
        with pytest.raises(JobError) as info:
            await call
        assert info.value.code == "FOREIGN_JOB"
    with pytest.raises(JobError) as missing:
        await jobs.read(owner, "job-99")
    assert missing.value.code == "NO_JOB"
    assert (await jobs.read(owner, job.id, wait=True)).output == "secret"


async def test_unread_output_is_capped_keeping_the_newest() -> None:
    jobs = JobService(max_output_bytes=100)
    owner = Agent("a")

    async def run(handle: JobHandle) -> str:
        for i in range(100):
            handle.write(f"line {i:03d}\n")
        return "done"

    job = jobs.start(owner, title="t", run=run)
    out = await jobs.read(owner, job.id, wait=True, timeout_ms=2000)
    assert out.truncated
    assert len(out.output.encode()) <= 100
    assert out.output.endswith("line 099\n")


async def test_collect_pulls_output_produced_elsewhere() -> None:
    jobs = JobService()
    owner = Agent("a")
    produced = ["from elsewhere"]
    finish = asyncio.Event()

    async def run(handle: JobHandle) -> str:
        await finish.wait()
        return "ok"

    def collect() -> str:
        text = "".join(produced)
        produced.clear()
        return text

    job = jobs.start(owner, title="t", run=run, collect=collect)
    assert (await jobs.read(owner, job.id)).output == "from elsewhere"
    produced.append(" and more")
    finish.set()
    final = await jobs.read(owner, job.id, wait=True)
    assert (final.output, final.result) == (" and more", "ok")


async def test_owner_dispose_cancels_running_jobs() -> None:
    jobs = JobService()
    owner = Agent("a")

    async def run(handle: JobHandle) -> str:
        await asyncio.Event().wait()
        return "never"

    job = jobs.start(owner, title="t", run=run)
    await owner.dispose()
    assert (job.task is not None and job.task.cancelled()) or job.status == "killed"
    with pytest.raises(JobError):
        jobs.start(owner, title="late", run=run)


async def test_the_end_notice_names_the_session_the_job_ran_on() -> None:
    jobs = JobService()
    owner = Agent("a")

    async def run(_handle: JobHandle) -> str:
        return "done"

    on_session = jobs.start(owner, title="send", run=run, session_id="pty-7")
    elsewhere = jobs.start(owner, title="other", run=run)
    await asyncio.wait_for(on_session.finished.wait(), 2)
    await asyncio.wait_for(elsewhere.finished.wait(), 2)
    data = {n.data["jobId"]: n.data for n in owner.drain_notices()}
    assert data[on_session.id] == {
        "jobId": on_session.id,
        "status": "completed",
        "sessionId": "pty-7",
    }
    assert "sessionId" not in data[elsewhere.id]
    await owner.dispose()
