"""The session registry: ids, authorization, publication, cancellation and cleanup.

Backends are the in-memory fakes from ``dsh_terminal_core.testing``, so every race is
staged explicitly instead of hoped for.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import DisposeError, OperationCancelled
from dsh_terminal_core.registry import (
    ALLOWED_SIGNALS,
    BackendCleanupError,
    BackendSession,
    ReadRequest,
    SendOperation,
    SendRequest,
    SessionStatus,
    Snapshot,
    SpawnRequest,
    TerminalBackend,
    TerminalError,
    TerminalSessionService,
    WaitReason,
)
from dsh_terminal_core.testing import FakeBackend, FakeSession

FAKE = SpawnRequest(type="fake")


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend("fake", motd="welcome\n")


@pytest.fixture
def service(backend: FakeBackend) -> TerminalSessionService:
    svc = TerminalSessionService(max_sessions_per_owner=4)
    svc.register_backend(backend)
    return svc


async def expect_code(code: str, call: Callable[[], Awaitable[object] | object]) -> TerminalError:
    """Run ``call`` (sync or async) and return the TerminalError it raised with ``code``."""
    with pytest.raises(TerminalError) as info:
        outcome = call()
        if isinstance(outcome, Awaitable):
            await outcome
    assert info.value.code == code, info.value
    return info.value


def flatten(error: BaseException) -> list[BaseException]:
    """Every leaf failure inside nested DisposeErrors (agent scope -> registry effect)."""
    if isinstance(error, DisposeError):
        return [leaf for inner in error.errors for leaf in flatten(inner)]
    return [error]


def only_session(backend: FakeBackend) -> FakeSession:
    assert len(backend.sessions) == 1
    return backend.sessions[0]


# -- backends -----------------------------------------------------------------------------


async def test_fake_backend_satisfies_the_protocols(backend: FakeBackend) -> None:
    assert isinstance(backend, TerminalBackend)
    owner = Agent("a")
    service = TerminalSessionService()
    service.register_backend(backend)
    result = await service.spawn(owner, FAKE)
    session = service.get_session(owner, result.session_id)
    assert isinstance(session, BackendSession)
    assert isinstance(
        service.start_send(owner, result.session_id, SendRequest(text="x")), SendOperation
    )
    await service.dispose()


async def test_duplicate_backend_type_is_refused(service: TerminalSessionService) -> None:
    await expect_code("DUPLICATE_BACKEND", lambda: service.register_backend(FakeBackend("fake")))
    assert service.list_backends() == ["fake"]


async def test_backend_disposer_unregisters_only_its_own_backend() -> None:
    service = TerminalSessionService()
    first = FakeBackend("fake")
    remove_first = service.register_backend(first)
    remove_other = service.register_backend(FakeBackend("other"))
    assert service.list_backends() == ["fake", "other"]
    remove_first()
    remove_first()
    assert service.list_backends() == ["other"]
    replacement = FakeBackend("fake")
    service.register_backend(replacement)
    remove_first()  # a stale disposer must not remove the replacement
    assert service.list_backends() == ["other", "fake"]
    remove_other()
    assert service.list_backends() == ["fake"]


async def test_backend_type_must_be_a_non_empty_string() -> None:
    service = TerminalSessionService()
    await expect_code("INVALID_ARGUMENT", lambda: service.register_backend(FakeBackend("")))


async def test_unregistering_a_backend_keeps_its_sessions_alive(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    remove = service.register_backend(FakeBackend("other"))
    result = await service.spawn(owner, SpawnRequest(type="other"))
    remove()
    assert [s.session_id for s in service.list(owner)] == [result.session_id]
    session = service.get_session(owner, result.session_id)
    assert isinstance(session, FakeSession)
    assert not session.closed
    err = await expect_code("NO_BACKEND", lambda: service.spawn(owner, SpawnRequest(type="other")))
    assert "fake" in str(err)
    assert await service.kill(owner, result.session_id, "done") is True
    assert session.closed


async def test_no_backend_names_the_registered_types(service: TerminalSessionService) -> None:
    service.register_backend(FakeBackend("shell"))
    err = await expect_code(
        "NO_BACKEND", lambda: service.spawn(Agent("a"), SpawnRequest(type="gdb"))
    )
    assert "'gdb'" in str(err)
    assert "fake, shell" in str(err)


# -- spawn --------------------------------------------------------------------------------


async def test_spawn_result_carries_the_backend_session(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    result = await service.spawn(owner, SpawnRequest(type="fake", name="build", cwd="/srv"))
    session = only_session(backend)
    assert result.session_id == "pty-1"
    assert result.name == "build"
    assert result.type == "fake"
    assert result.pid == session.pid
    assert result.status == SessionStatus.running()
    assert result.motd == "welcome\n"
    context = backend.contexts[0]
    assert context.owner is owner
    assert (context.session_id, context.name, context.cwd) == ("pty-1", "build", "/srv")
    assert not context.cancel.cancelled
    assert service.get_session(owner, "pty-1") is session
    assert service.session_type(owner, "pty-1") == "fake"
    await owner.dispose()


async def test_ids_are_minted_service_wide_and_never_reused(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    a, b = Agent("a"), Agent("b")
    assert (await service.spawn(a, FAKE)).session_id == "pty-1"
    assert (await service.spawn(b, FAKE)).session_id == "pty-2"
    assert await service.kill(a, "pty-1", "done")
    backend.fail_next_spawn(RuntimeError("no shell"))
    with pytest.raises(RuntimeError, match="no shell"):
        await service.spawn(a, FAKE)
    assert (await service.spawn(a, FAKE)).session_id == "pty-4"
    await a.dispose()
    await b.dispose()


@pytest.mark.parametrize(
    "request_",
    [
        SpawnRequest(type=""),
        SpawnRequest(type=5),  # type: ignore[arg-type]
        SpawnRequest(type="fake", name=""),
        SpawnRequest(type="fake", name="x" * 65),
        SpawnRequest(type="fake", name="a\nb"),
        SpawnRequest(type="fake", name="tab\there"),
        SpawnRequest(type="fake", name=7),  # type: ignore[arg-type]
        SpawnRequest(type="fake", cwd=3),  # type: ignore[arg-type]
        "fake",
    ],
)
async def test_invalid_spawn_requests_are_refused(
    service: TerminalSessionService, backend: FakeBackend, request_: SpawnRequest
) -> None:
    await expect_code("INVALID_ARGUMENT", lambda: service.spawn(Agent("a"), request_))
    assert backend.contexts == []


async def test_a_64_character_name_is_accepted(service: TerminalSessionService) -> None:
    owner = Agent("a")
    result = await service.spawn(owner, SpawnRequest(type="fake", name="n" * 64))
    assert result.name == "n" * 64
    await owner.dispose()


async def test_spawn_is_published_only_after_backend_setup(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()
    assert service.list(owner) == []
    for op in (
        lambda: service.get_session(owner, "pty-1"),
        lambda: service.read(owner, "pty-1", ReadRequest()),
        lambda: service.kill(owner, "pty-1", "x"),
    ):
        await expect_code("NO_SESSION", op)
    backend.release()
    result = await spawning
    assert [s.session_id for s in service.list(owner)] == [result.session_id]
    await owner.dispose()


async def test_duplicate_name_against_live_sessions_and_spawns_in_flight(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner, other = Agent("a"), Agent("b")
    await service.spawn(owner, SpawnRequest(type="fake", name="web"))
    await expect_code(
        "DUPLICATE_NAME", lambda: service.spawn(owner, SpawnRequest(type="fake", name="web"))
    )

    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, SpawnRequest(type="fake", name="db")))
    await backend.wait_in_flight()
    err = await expect_code(
        "DUPLICATE_NAME", lambda: service.spawn(owner, SpawnRequest(type="fake", name="db"))
    )
    assert "pty-2" in str(err)
    backend.release()
    await spawning

    # Names are per owner, and free again once their session is gone.
    await service.spawn(other, SpawnRequest(type="fake", name="web"))
    assert await service.kill(owner, "pty-1", "done")
    again = await service.spawn(owner, SpawnRequest(type="fake", name="web"))
    assert again.name == "web"
    await owner.dispose()
    await other.dispose()


async def test_session_limit_counts_spawns_in_flight_and_recovers_after_close(
    backend: FakeBackend,
) -> None:
    service = TerminalSessionService(max_sessions_per_owner=2)
    service.register_backend(backend)
    owner, other = Agent("a"), Agent("b")
    first = await service.spawn(owner, FAKE)
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()

    err = await expect_code("SESSION_LIMIT", lambda: service.spawn(owner, FAKE))
    assert "2 terminal sessions" in str(err)
    assert "terminal_close" in str(err)
    backend.release()
    await spawning
    await expect_code("SESSION_LIMIT", lambda: service.spawn(owner, FAKE))
    # The cap is per owner.
    await service.spawn(other, FAKE)

    assert await service.kill(owner, first.session_id, "make room")
    await service.spawn(owner, FAKE)
    await service.dispose()


async def test_service_rejects_a_bad_limit() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            TerminalSessionService(max_sessions_per_owner=bad)  # type: ignore[arg-type]


async def test_owner_not_live_refuses_spawns(service: TerminalSessionService) -> None:
    owner = Agent("a")
    await service.spawn(owner, FAKE)
    await owner.dispose()
    await expect_code("OWNER_NOT_LIVE", lambda: service.spawn(owner, FAKE))
    never_spawned = Agent("b")
    await never_spawned.dispose()
    await expect_code("OWNER_NOT_LIVE", lambda: service.spawn(never_spawned, FAKE))


async def test_service_disposing_refuses_spawns(service: TerminalSessionService) -> None:
    await service.dispose()
    assert service.disposing
    await expect_code("SERVICE_DISPOSING", lambda: service.spawn(Agent("a"), FAKE))


# -- cancellation and rollback ------------------------------------------------------------


async def test_an_already_cancelled_caller_never_reaches_the_backend(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    cancel = Cancellation()
    reason = OperationCancelled("user pressed stop")
    cancel.cancel(reason)
    with pytest.raises(OperationCancelled) as info:
        await service.spawn(owner, FAKE, cancel)
    assert info.value is reason
    assert backend.contexts == []
    assert not service.has_owner_activity(owner)


async def test_caller_cancellation_reaches_the_backend_with_the_callers_reason(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    cancel = Cancellation()
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE, cancel))
    await backend.wait_in_flight()
    reason = OperationCancelled("turn aborted")
    cancel.cancel(reason)
    with pytest.raises(OperationCancelled) as info:
        await spawning
    assert info.value is reason
    assert backend.contexts[0].cancel.reason is reason
    assert backend.aborted[0].closed
    assert service.list(owner) == []
    assert not service.has_owner_activity(owner)
    await owner.dispose()


async def test_a_backend_failing_after_cancel_still_yields_the_callers_reason(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    cancel = Cancellation()
    reason = OperationCancelled("stop")
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE, cancel))
    await backend.wait_in_flight()

    def fail_instead(session: FakeSession) -> None:
        raise RuntimeError("backend tripped while aborting")

    backend.honor_cancel = False
    backend.on_spawned = fail_instead
    cancel.cancel(reason)
    backend.release()
    with pytest.raises(OperationCancelled) as info:
        await spawning
    assert info.value is reason
    await owner.dispose()


async def test_rollback_when_caller_cancels_while_backend_finishes_anyway(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    cancel = Cancellation()
    backend.honor_cancel = False
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE, cancel))
    await backend.wait_in_flight()
    reason = OperationCancelled("stop")
    cancel.cancel(reason)
    backend.release()
    with pytest.raises(OperationCancelled) as info:
        await spawning
    assert info.value is reason
    session = only_session(backend)
    assert session.closed
    assert session.close_reasons == ["spawn rolled back"]
    assert service.list(owner) == []
    await owner.dispose()


async def test_callers_reason_survives_a_failed_rollback_and_disposal_reports_it(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    cancel = Cancellation()
    backend.honor_cancel = False
    backend.on_spawned = lambda session: session.fail_next_close()
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE, cancel))
    await backend.wait_in_flight()
    reason = OperationCancelled("stop")
    cancel.cancel(reason)
    backend.release()
    with pytest.raises(OperationCancelled) as info:
        await spawning
    assert info.value is reason
    session = only_session(backend)
    assert not session.closed
    assert service.list(owner) == []
    await expect_code("NO_SESSION", lambda: service.get_session(owner, session.session_id))

    with pytest.raises(DisposeError) as disposal:
        await owner.dispose()
    leaves = flatten(disposal.value)
    assert len(leaves) == 1
    assert isinstance(leaves[0], BackendCleanupError)
    assert leaves[0].code == "BACKEND_CLEANUP"
    # Disposal also retried the close the rollback could not finish.
    assert session.closed
    assert session.close_reasons == ["spawn rolled back", "owner disposed"]


async def test_backend_cleanup_error_from_a_failed_spawn_is_kept_for_disposal(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    await service.spawn(owner, FAKE)
    leak = BackendCleanupError("half-made shell survived")
    backend.fail_next_spawn(leak)
    with pytest.raises(BackendCleanupError) as info:
        await service.spawn(owner, FAKE)
    assert info.value is leak
    with pytest.raises(DisposeError) as disposal:
        await owner.dispose()
    assert flatten(disposal.value) == [leak]


async def test_owner_disposed_during_spawn_aborts_it_through_the_backend(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()
    await owner.dispose()
    err = await expect_code("OWNER_NOT_LIVE", lambda: spawning)
    assert backend.contexts[0].cancel.reason is err
    assert backend.aborted[0].closed
    assert backend.sessions == []
    assert not service.has_owner_activity(owner)


async def test_rollback_when_owner_disposed_while_backend_ignores_the_abort(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    backend.honor_cancel = False
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()
    disposing = asyncio.create_task(owner.dispose())
    await asyncio.sleep(0)
    assert backend.contexts[0].cancel.cancelled
    assert not disposing.done()  # disposal waits for the pending spawn
    backend.release()
    await disposing
    await expect_code("OWNER_NOT_LIVE", lambda: spawning)
    session = only_session(backend)
    assert session.closed
    assert session.close_reasons == ["spawn rolled back"]
    assert service.list(owner) == []
    await expect_code("NO_SESSION", lambda: service.get_session(owner, "pty-1"))


async def test_service_dispose_during_spawn_rolls_back_with_service_disposing(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    backend.honor_cancel = False
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()
    disposing = asyncio.create_task(service.dispose())
    await asyncio.sleep(0)
    backend.release()
    await disposing
    await expect_code("SERVICE_DISPOSING", lambda: spawning)
    assert only_session(backend).closed
    await owner.dispose()


# -- owner activity -----------------------------------------------------------------------


async def test_owner_activity_has_no_gap_from_spawn_to_close_end(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    assert not service.has_owner_activity(owner)
    seen_at_backend_return: list[tuple[bool, list[Snapshot]]] = []
    backend.on_spawned = lambda _session: seen_at_backend_return.append(
        (service.has_owner_activity(owner), service.list(owner))
    )
    samples: list[bool] = []
    stop = False

    async def watch() -> None:
        while not stop:
            samples.append(service.has_owner_activity(owner))
            await asyncio.sleep(0)

    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    watcher = asyncio.create_task(watch())
    await backend.wait_in_flight()
    assert service.has_owner_activity(owner)
    backend.release()
    result = await spawning
    # The last moment before publication: still pending, not yet visible.
    assert seen_at_backend_return == [(True, [])]
    assert service.has_owner_activity(owner)

    session = only_session(backend)
    session.close_gate = asyncio.Event()
    killing = asyncio.create_task(service.kill(owner, result.session_id, "done"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert service.has_owner_activity(owner)  # close in flight
    session.close_gate.set()
    assert await killing is True
    stop = True
    await watcher
    assert not service.has_owner_activity(owner)

    # Every sample is True up to the close's end and False after it: never a gap.
    first_false = samples.index(False) if False in samples else len(samples)
    assert first_false > 5
    assert all(samples[:first_false])
    assert not any(samples[first_false:])
    await owner.dispose()


async def test_owner_activity_covers_a_failed_close_until_it_is_retried(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    result = await service.spawn(owner, FAKE)
    only_session(backend).fail_next_close()
    with pytest.raises(BackendCleanupError):
        await service.kill(owner, result.session_id, "first try")
    assert service.has_owner_activity(owner)
    assert await service.kill(owner, result.session_id, "second try") is True
    assert not service.has_owner_activity(owner)
    await owner.dispose()


# -- authorization ------------------------------------------------------------------------


async def test_unknown_ids_yield_no_session_on_every_operation(
    service: TerminalSessionService,
) -> None:
    owner = Agent("a")
    await service.spawn(owner, FAKE)
    for op in (
        lambda: service.start_send(owner, "pty-99", SendRequest(text="ls")),
        lambda: service.read(owner, "pty-99", ReadRequest()),
        lambda: service.signal(owner, "pty-99", "SIGINT"),
        lambda: service.kill(owner, "pty-99", "x"),
        lambda: service.get_session(owner, "pty-99"),
        lambda: service.session_type(owner, "pty-99"),
    ):
        await expect_code("NO_SESSION", op)
    await owner.dispose()


async def test_foreign_session_on_every_operation_leaks_nothing(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner, intruder = Agent("same-id"), Agent("same-id")
    result = await service.spawn(owner, SpawnRequest(type="fake", name="secret-name"))
    session = only_session(backend)
    session.emit("password=hunter2\n")
    sid = result.session_id
    for op in (
        lambda: service.start_send(intruder, sid, SendRequest(text="cat /etc/shadow")),
        lambda: service.read(intruder, sid, ReadRequest()),
        lambda: service.signal(intruder, sid, "SIGKILL"),
        lambda: service.kill(intruder, sid, "hostile"),
        lambda: service.get_session(intruder, sid),
        lambda: service.session_type(intruder, sid),
    ):
        err = await expect_code("FOREIGN_SESSION", op)
        assert "hunter2" not in str(err)
        assert "secret-name" not in str(err)
    assert session.sends == []
    assert session.signals == []
    assert session.close_reasons == []
    assert not session.closed
    assert service.list(intruder) == []
    assert not service.has_owner_activity(intruder)
    # The intruder's own disposal leaves the owner's session alone.
    await intruder.dispose()
    assert not session.closed
    await owner.dispose()
    assert session.closed


# -- session operations -------------------------------------------------------------------


async def test_send_active_is_enforced_by_the_backend(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    session = only_session(backend)
    op = service.start_send(owner, sid, SendRequest(text="make", submit=True))
    await expect_code("SEND_ACTIVE", lambda: service.start_send(owner, sid, SendRequest(text="ls")))
    session.emit("building\n")
    assert op.read_output() == "building\n"
    session.emit("done\n")
    session.sends[0].settle(exit_code=0)
    result = await op.done
    assert result.viewport == "building\ndone\n"
    assert result.wait_reason is WaitReason.STDIN_READ
    assert result.exit_code == 0
    assert op.read_output() == "done\n"
    second = service.start_send(owner, sid, SendRequest(text="ls", submit=False))
    assert session.sends[1].request.submit is False
    await second.cancel()
    assert (await second.done).exit_code == 130
    await owner.dispose()


async def test_closing_settles_an_active_send_as_session_exit(
    service: TerminalSessionService,
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    op = service.start_send(owner, sid, SendRequest(text="sleep 100"))
    await owner.dispose()
    result = await op.done
    assert result.wait_reason is WaitReason.SESSION_EXIT
    assert result.session_status.kind == "exited"


@pytest.mark.parametrize(
    "request_",
    [
        SendRequest(text=5),  # type: ignore[arg-type]
        SendRequest(text="ls", submit="yes"),  # type: ignore[arg-type]
        SendRequest(text="ls", cancel="soon"),  # type: ignore[arg-type]
        "ls",
    ],
)
async def test_invalid_send_requests_are_refused(
    service: TerminalSessionService, backend: FakeBackend, request_: SendRequest
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    await expect_code("INVALID_ARGUMENT", lambda: service.start_send(owner, sid, request_))
    assert only_session(backend).sends == []
    await owner.dispose()


async def test_read_pages_through_the_backend(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    only_session(backend).emit("one\ntwo\nthree\n")
    page = service.read(owner, sid, ReadRequest(offset=2, count=1))
    assert (page.text, page.total_lines, page.line_begin, page.line_end) == ("two", 3, 2, 2)
    assert page.truncated
    assert service.read(owner, sid, ReadRequest(count=10_000)).text == "one\ntwo\nthree"
    await owner.dispose()


@pytest.mark.parametrize(
    "request_",
    [
        ReadRequest(offset=-1),
        ReadRequest(offset=0),  # lines are numbered from 1
        ReadRequest(offset=True),
        ReadRequest(offset=1.0),  # type: ignore[arg-type]
        ReadRequest(count=0),
        ReadRequest(count=10_001),
        ReadRequest(count="5"),  # type: ignore[arg-type]
        "all",
    ],
)
async def test_invalid_read_requests_are_refused(
    service: TerminalSessionService, request_: ReadRequest
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    await expect_code("INVALID_ARGUMENT", lambda: service.read(owner, sid, request_))
    await owner.dispose()


async def test_signal_allows_only_the_listed_signals(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    session = only_session(backend)
    bad_signals: tuple[object, ...] = ("SIGUSR1", "sigint", "INT", 2, "")
    for bad in bad_signals:
        await expect_code("INVALID_ARGUMENT", functools.partial(service.signal, owner, sid, bad))  # type: ignore[arg-type]
    assert session.signals == []
    for sig in ALLOWED_SIGNALS:
        result = await service.signal(owner, sid, sig)
        assert result.delivered
        assert result.target_pgid == session.pid
    assert session.signals == list(ALLOWED_SIGNALS)
    await owner.dispose()


async def test_kill_reports_whether_this_call_closed_the_session(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    session = only_session(backend)
    session.close_gate = asyncio.Event()
    first = asyncio.create_task(service.kill(owner, sid, "first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(service.kill(owner, sid, "second"))
    await asyncio.sleep(0)
    assert not first.done()
    assert not second.done()  # the joiner waits for the close in flight
    session.close_gate.set()
    assert await first is True
    assert await second is False
    assert session.close_reasons == ["first"]
    assert session.closed
    await expect_code("NO_SESSION", lambda: service.kill(owner, sid, "third"))
    await owner.dispose()


async def test_a_failed_kill_leaves_the_session_registered_and_retryable(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    session = only_session(backend)
    boom = RuntimeError("pids 4242 survived")
    session.fail_next_close(boom)
    with pytest.raises(RuntimeError) as info:
        await service.kill(owner, sid, "try")
    assert info.value is boom
    assert [s.session_id for s in service.list(owner)] == [sid]
    assert service.get_session(owner, sid) is session
    assert await service.kill(owner, sid, "retry") is True
    assert service.list(owner) == []
    await owner.dispose()


async def test_a_cancelled_kill_caller_does_not_interrupt_the_close(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, FAKE)).session_id
    session = only_session(backend)
    session.close_gate = asyncio.Event()
    killing = asyncio.create_task(service.kill(owner, sid, "bye"))
    await asyncio.sleep(0)
    killing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await killing
    assert service.has_owner_activity(owner)
    session.close_gate.set()
    assert await service.kill(owner, sid, "join") is False
    assert session.closed
    assert not service.has_owner_activity(owner)
    await owner.dispose()


async def test_list_is_in_creation_order_with_snapshot_fields(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner, other = Agent("a"), Agent("b")
    slow = FakeBackend("slow")
    service.register_backend(slow)
    slow.hold()
    # pty-1 is created first but published last.
    opening = asyncio.create_task(service.spawn(owner, SpawnRequest(type="slow", name="late")))
    await slow.wait_in_flight()
    await service.spawn(owner, SpawnRequest(type="fake", name="web", cwd="/srv/web"))
    await service.spawn(other, FAKE)
    await service.spawn(owner, SpawnRequest(type="fake"))
    slow.release()
    await opening

    snapshots = service.list(owner)
    assert [s.session_id for s in snapshots] == ["pty-1", "pty-2", "pty-4"]
    late, web, plain = snapshots
    assert (late.name, late.type, late.cwd) == ("late", "slow", None)
    assert late.pid == slow.sessions[0].pid
    assert web == Snapshot(
        session_id="pty-2",
        name="web",
        type="fake",
        pid=backend.sessions[0].pid,
        status=SessionStatus.running(),
        cwd="/srv/web",
    )
    assert (plain.name, plain.status.kind) == (None, "running")
    assert [s.session_id for s in service.list(other)] == ["pty-3"]
    assert service.list(Agent("stranger")) == []
    await service.dispose()


# -- disposal -----------------------------------------------------------------------------


async def test_owner_disposal_closes_everything_and_aggregates_failures(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner, bystander = Agent("a"), Agent("b")
    for _ in range(3):
        await service.spawn(owner, FAKE)
    kept = await service.spawn(bystander, FAKE)
    first, second, third = backend.sessions[:3]
    second.fail_next_close(RuntimeError("pid 11 survived"))
    third.fail_next_close()
    backend.hold()
    spawning = asyncio.create_task(service.spawn(owner, FAKE))
    await backend.wait_in_flight()

    with pytest.raises(DisposeError) as disposal:
        await owner.dispose()
    leaves = flatten(disposal.value)
    assert all(isinstance(leaf, BackendCleanupError) for leaf in leaves)
    assert len(leaves) == 2
    assert "pty-2" in str(leaves[0]) or "pty-2" in str(leaves[1])
    await expect_code("OWNER_NOT_LIVE", lambda: spawning)
    assert first.closed
    assert not second.closed
    assert not third.closed
    assert all(s.close_reasons == ["owner disposed"] for s in (first, second, third))
    await expect_code("OWNER_NOT_LIVE", lambda: service.spawn(owner, FAKE))
    # The failed sessions stay registered, so the service's own shutdown retries them.
    assert [s.session_id for s in service.list(owner)] == ["pty-2", "pty-3"]
    assert service.get_session(bystander, kept.session_id).status.kind == "running"

    await service.dispose()
    assert second.closed
    assert third.closed
    assert backend.sessions[3].closed
    assert not service.has_owner_activity(owner)
    await bystander.dispose()


async def test_service_dispose_closes_every_owner_and_is_idempotent(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    a, b = Agent("a"), Agent("b")
    await service.spawn(a, FAKE)
    await service.spawn(b, FAKE)
    backend.hold()
    spawning = asyncio.create_task(service.spawn(b, FAKE))
    await backend.wait_in_flight()

    first, second = asyncio.create_task(service.dispose()), asyncio.create_task(service.dispose())
    await asyncio.gather(first, second)
    await expect_code("SERVICE_DISPOSING", lambda: spawning)
    assert all(s.closed for s in backend.sessions)
    assert backend.aborted[0].closed
    assert service.list(a) == [] and service.list(b) == []
    assert not service.has_owner_activity(a)
    await service.dispose()
    # The owners' effects were detached; disposing them is quiet.
    await a.dispose()
    await b.dispose()


async def test_service_dispose_aggregates_failures(
    service: TerminalSessionService, backend: FakeBackend
) -> None:
    owner = Agent("a")
    await service.spawn(owner, FAKE)
    await service.spawn(owner, FAKE)
    backend.sessions[1].fail_next_close(RuntimeError("stuck"))
    with pytest.raises(DisposeError) as disposal:
        await service.dispose()
    (leaf,) = flatten(disposal.value)
    assert isinstance(leaf, BackendCleanupError)
    assert isinstance(leaf.cause, RuntimeError)
    assert "pty-2" in str(leaf)
    assert backend.sessions[0].closed
    # The survivor stays with its owner, whose disposal retries it.
    assert service.has_owner_activity(owner)
    await owner.dispose()
    assert backend.sessions[1].closed
