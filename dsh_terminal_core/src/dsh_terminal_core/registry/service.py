"""The owner-scoped terminal session registry (``ctx.terminals``).

Backends own terminal behaviour; this service owns what must be the same for every
backend: session ids, authorization by the exact owner object, publication only after a
backend finished setting a session up, and cleanup when an owner or the harness goes away.

Invariants kept here:

* a session id is visible to callers only once its backend session exists and its owner
  is still live — a half-made session is never reachable;
* an owner's activity (pending spawns, live sessions, closes in flight) has no gap: the
  pending record is dropped in the same synchronous step that publishes the session;
* a session leaves the registry only after its backend closed it, so a failed close is
  retryable and still counted as activity;
* a caller's cancellation reason is what the caller gets back, whatever cleanup did.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
from collections.abc import Callable, Iterable

import attrs

from ..kernel.agents import Agent
from ..kernel.cancel import Cancellation, finish_shielded
from ..kernel.errors import (
    BackendCleanupError,
    DisposeError,
    InvalidArgument,
    TerminalError,
    owner_not_live,
)
from ..kernel.turns import take_turn
from .checks import (
    MAX_READ_COUNT,
    check_encodable,
    check_max_bytes,
    check_secret_send,
    check_size,
    is_int,
    no_backend,
    not_at_secret_prompt,
    service_disposing,
    validate_spawn,
)
from .control import HumanControl, HumanGate
from .linematch import compile_line_pattern
from .observers import SendObservers, spawn_announced
from .search import search_session
from .types import (
    ALLOWED_SIGNALS,
    BackendSession,
    BackendSpawnContext,
    LineTailSession,
    ListeningSession,
    MarkedBackend,
    ReadRequest,
    ReadResult,
    ScreenRead,
    SearchRequest,
    SearchResult,
    SecretPromptSession,
    SendObserver,
    SendOperation,
    SendRequest,
    SignalResult,
    Snapshot,
    SpawnRequest,
    SpawnResult,
    TerminalBackend,
    TerminalSize,
    WorldRouter,
)

__all__ = ["LOCAL_WORLD", "TerminalSessionService"]

#: The built-in world: this host, the in-process provider.
LOCAL_WORLD = "local"


@attrs.define(eq=False)
class _Entry:
    """A published session: who owns it, what the caller sees, and any close in flight."""

    seq: int
    session_id: str
    owner: Agent
    type: str
    name: str | None
    session: BackendSession
    opened_by: str | None = None
    closing: asyncio.Task[None] | None = None
    world: str = "local"
    # Who types into it: the agent, or a person who took control (SPEC §22).
    human: HumanControl = attrs.field(
        default=attrs.Factory(lambda self: HumanControl(self.session_id), takes_self=True)
    )


@attrs.define(eq=False)
class _PendingSpawn:
    """A spawn between its first line and its end; ``control`` is the backend's token."""

    session_id: str
    name: str | None
    control: Cancellation
    finished: asyncio.Event = attrs.field(factory=asyncio.Event)


@attrs.define(eq=False)
class _OwnerState:
    """Everything the service tracks for one owner, created at the owner's first spawn."""

    remove_effect: Callable[[], None]
    dead: bool = False
    sessions: dict[str, _Entry] = attrs.field(factory=dict)
    pending: dict[str, _PendingSpawn] = attrs.field(factory=dict)
    # Failures no caller could be told about; the owner's disposal reports them.
    cleanup_errors: builtins.list[BackendCleanupError] = attrs.field(factory=builtins.list)
    # Unpublished backend sessions whose rollback failed; disposal tries them again.
    orphans: dict[str, BackendSession] = attrs.field(factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.sessions or self.pending or self.cleanup_errors or self.orphans)


class TerminalSessionService(HumanGate):
    """Mint ids for backend sessions, authorize every call, and clean up after owners.

    While a person holds control of a session (:class:`HumanGate`), its sends, signals
    and resizes are refused with ``HUMAN_CONTROL``.

    ``max_sessions_per_owner`` bounds live sessions plus spawns in flight per owner.
    """

    def __init__(self, max_sessions_per_owner: int = 16) -> None:
        if (
            not isinstance(max_sessions_per_owner, int)
            or isinstance(max_sessions_per_owner, bool)
            or max_sessions_per_owner < 1
        ):
            raise InvalidArgument("max_sessions_per_owner must be a positive integer")
        self._max_per_owner = max_sessions_per_owner
        self._backends: dict[str, TerminalBackend] = {}
        self._worlds: WorldRouter | None = None
        self._origins: dict[str, str | None] = {}
        self._stamp: Callable[[], str | None] | None = None
        self._sessions: dict[str, _Entry] = {}
        self._owners: dict[Agent, _OwnerState] = {}
        self._ids = itertools.count(1)
        self._disposing = False
        self._disposed: asyncio.Event | None = None
        self._sends = SendObservers()

    @property
    def max_sessions_per_owner(self) -> int:
        return self._max_per_owner

    @property
    def disposing(self) -> bool:
        """True once :meth:`dispose` started; new spawns are refused from then on."""
        return self._disposing

    # -- backends -------------------------------------------------------------------------

    def register_backend(self, backend: TerminalBackend) -> Callable[[], None]:
        """Make ``backend`` available under its ``type``; return a function that removes it.

        Raises ``DUPLICATE_BACKEND`` when the type is taken. Removing a backend does not
        close its sessions: they belong to their owners and survive a plugin reload.
        """
        kind = getattr(backend, "type", None)
        if not isinstance(kind, str) or not kind:
            raise TerminalError(
                "a terminal backend needs a non-empty string type", "INVALID_ARGUMENT"
            )
        if kind in self._backends:
            raise TerminalError(
                f"a terminal backend of type {kind!r} is already registered", "DUPLICATE_BACKEND"
            )
        self._backends[kind] = backend
        self._origins[kind] = self._stamp() if self._stamp is not None else None

        def unregister() -> None:
            if self._backends.get(kind) is backend:
                del self._backends[kind]
                self._origins.pop(kind, None)

        return unregister

    def observe_sends(self, observer: SendObserver) -> Callable[[], None]:
        """Tell ``observer`` of every send from now on (SPEC §23); returns its remover."""
        return self._sends.add(observer)

    def list_backends(self) -> builtins.list[str]:
        """Return the registered backend types in registration order."""
        return builtins.list(self._backends)

    def backend(self, kind: str) -> TerminalBackend | None:
        """The backend registered as ``kind`` (for what it offers beyond spawning, such
        as ``dsh-terminal env``'s login environment); ``None`` when there is none."""
        return self._backends.get(kind)

    def stamp_backends_with(self, stamp: Callable[[], str | None]) -> None:
        """Record, for each backend registered from now on, the plugin ``stamp()`` names.

        The host passes the name of the plugin being applied, so ``dsh-terminal plugins``
        can say which plugin registered which backend type.
        """
        self._stamp = stamp

    def backend_origins(self) -> dict[str, str | None]:
        """Return ``{backend type: registering plugin or None}`` in registration order."""
        return dict(self._origins)

    # -- spawn ----------------------------------------------------------------------------

    async def spawn(
        self, owner: Agent, request: SpawnRequest, cancel: Cancellation | None = None
    ) -> SpawnResult:
        """Create a session through the backend for ``request.type`` and publish it.

        Refusals, checked in this order: ``INVALID_ARGUMENT``, the caller's cancellation,
        ``SERVICE_DISPOSING``, ``OWNER_NOT_LIVE``, ``NO_BACKEND``, ``DUPLICATE_NAME``,
        ``SESSION_LIMIT``. The session is published only if, once the backend finished,
        the caller has not cancelled, the owner is live and the service is not disposing;
        otherwise it is closed again and the caller gets its own cancellation reason,
        ``OWNER_NOT_LIVE`` or ``SERVICE_DISPOSING``. A failed rollback never replaces that
        error; it is kept as :class:`BackendCleanupError` for the owner's disposal.
        """
        validate_spawn(request)
        if cancel is not None:
            cancel.raise_if_cancelled()
        if self._disposing:
            raise service_disposing()
        if not owner.live:
            raise owner_not_live(owner)
        world = self._world_of(request)
        if world == LOCAL_WORLD:
            backend = self._backends.get(request.type)
            if backend is None:
                raise no_backend(request.type, builtins.list(self._backends))
        else:
            assert self._worlds is not None
            backend = self._worlds.backend(world, request.type)
        state = self._owners.get(owner)
        if state is not None and state.dead:
            raise owner_not_live(owner)
        if state is not None and request.name is not None:
            self._check_name_free(state, request.name)
        in_use = 0 if state is None else len(state.sessions) + len(state.pending)
        if in_use >= self._max_per_owner:
            raise TerminalError(
                f"agent already has {self._max_per_owner} terminal sessions (the limit, "
                "counting sessions still opening)",
                "SESSION_LIMIT",
                advice="close sessions you no longer need with terminal_close",
            )

        if state is None:
            state = self._adopt_owner(owner)
        seq = next(self._ids)
        while self._taken(f"pty-{seq}"):  # an adopted session kept its id
            seq = next(self._ids)
        session_id = f"pty-{seq}"
        pending = _PendingSpawn(session_id=session_id, name=request.name, control=Cancellation())
        state.pending[session_id] = pending
        unlink = cancel.on_cancel(pending.control.cancel) if cancel is not None else _nothing
        try:
            # Opens started together prepare one per loop iteration: the backend's first
            # step (arguments, sandbox, environment) runs in a turn of its own.
            await take_turn()
            context = BackendSpawnContext(
                owner=owner,
                session_id=session_id,
                name=request.name,
                cwd=request.cwd,
                cancel=pending.control,
                screen=request.screen,
                rows=request.rows,
                cols=request.cols,
            )
            try:
                session = await spawn_announced(backend, context)
            except Exception as exc:
                if isinstance(exc, BackendCleanupError):
                    state.cleanup_errors.append(exc)
                # A backend aborted by our token re-raises its reason; anything else it
                # raised after an abort is reported as the abort the caller asked for.
                refusal = pending.control.reason
                if cancel is not None and cancel.reason is not None:
                    refusal = cancel.reason
                if refusal is None or refusal is exc:
                    raise
                raise refusal from exc

            refusal = self._refusal(owner, state, cancel, pending)
            if refusal is None:
                return self._publish(owner, state, request, seq, session, world)
            failure = await finish_shielded(
                _close_quietly(session, session_id, "spawn rolled back")
            )
            if failure is not None:
                state.cleanup_errors.append(failure)
                state.orphans[session_id] = session
            raise refusal
        finally:
            unlink()
            del state.pending[session_id]
            pending.finished.set()

    def _check_name_free(self, state: _OwnerState, name: str) -> None:
        holders = [e.session_id for e in state.sessions.values() if e.name == name]
        holders += [p.session_id for p in state.pending.values() if p.name == name]
        if holders:
            raise TerminalError(
                f"this agent already has a terminal session named {name!r} ({holders[0]}); "
                "choose another name or close that session first",
                "DUPLICATE_NAME",
            )

    def _adopt_owner(self, owner: Agent) -> _OwnerState:
        """Start tracking ``owner`` and make its disposal close what it owns."""

        async def on_owner_disposed() -> None:
            await self._dispose_owner(owner)

        state = _OwnerState(remove_effect=owner.on_dispose(on_owner_disposed))
        self._owners[owner] = state
        return state

    def _refusal(
        self,
        owner: Agent,
        state: _OwnerState,
        cancel: Cancellation | None,
        pending: _PendingSpawn,
    ) -> BaseException | None:
        """Say why a finished backend spawn must not be published, or None to publish."""
        if cancel is not None and cancel.reason is not None:
            return cancel.reason
        if self._disposing:
            return service_disposing()
        if state.dead or not owner.live:
            return owner_not_live(owner)
        return pending.control.reason

    def _publish(
        self,
        owner: Agent,
        state: _OwnerState,
        request: SpawnRequest,
        seq: int,
        session: BackendSession,
        world: str = "local",
    ) -> SpawnResult:
        session_id = f"pty-{seq}"
        entry = _Entry(
            seq=seq,
            session_id=session_id,
            owner=owner,
            type=request.type,
            name=request.name,
            session=session,
            opened_by=request.opened_by,
            world=world,
        )
        self._sessions[session_id] = entry
        state.sessions[session_id] = entry
        return SpawnResult(
            session_id=session_id,
            name=request.name,
            type=request.type,
            pid=session.pid,
            status=session.status,
            motd=session.motd,
            world=world,
        )

    def _taken(self, session_id: str) -> bool:
        if session_id in self._sessions:
            return True
        return any(session_id in state.pending for state in self._owners.values())

    def adopt(
        self,
        owner: Agent,
        session: BackendSession,
        *,
        session_id: str | None,
        type: str,
        name: str | None = None,
        opened_by: str | None = None,
        world: str = LOCAL_WORLD,
    ) -> str:
        """Publish a session that is already live (a world kept it for ``owner``'s id).

        It keeps ``session_id`` when that id is free here, else gets a fresh one; the id
        is returned. ``OWNER_NOT_LIVE`` and ``SERVICE_DISPOSING`` refuse it as they refuse
        a spawn; the caller still owns the session then. A name already used by another
        of the owner's sessions is dropped rather than refused: the session exists.
        """
        if self._disposing:
            raise service_disposing()
        if not owner.live:
            raise owner_not_live(owner)
        state = self._owners.get(owner)
        if state is not None and state.dead:
            raise owner_not_live(owner)
        if state is None:
            state = self._adopt_owner(owner)
        seq: int | None = None
        if session_id is not None and not self._taken(session_id):
            number = session_id.removeprefix("pty-")
            seq = int(number) if number.isdigit() else None
        if seq is None:
            seq = next(self._ids)
            while self._taken(f"pty-{seq}"):
                seq = next(self._ids)
            session_id = f"pty-{seq}"
        assert session_id is not None
        if name is not None and any(e.name == name for e in state.sessions.values()):
            name = None
        entry = _Entry(
            seq=seq,
            session_id=session_id,
            owner=owner,
            type=type,
            name=name,
            session=session,
            opened_by=opened_by,
            world=world,
        )
        self._sessions[session_id] = entry
        state.sessions[session_id] = entry
        return session_id

    def use_worlds(self, worlds: WorldRouter) -> None:
        """Open sessions in the worlds ``worlds`` routes to, as well as here (SPEC §21)."""
        self._worlds = worlds

    def worlds(self) -> builtins.list[str]:
        """The worlds a spawn may name, ``local`` first."""
        return self._worlds.names() if self._worlds is not None else [LOCAL_WORLD]

    def _world_of(self, request: SpawnRequest) -> str:
        name = request.world
        if name is None:
            return self._worlds.default if self._worlds is not None else LOCAL_WORLD
        if not isinstance(name, str) or name not in self.worlds():
            raise TerminalError(
                f"no world named {name!r} (configured: {', '.join(self.worlds())})",
                "INVALID_ARGUMENT",
            )
        return name

    # -- activity and lookup --------------------------------------------------------------

    def has_owner_activity(self, owner: Agent) -> bool:
        """Return True while ``owner`` has a spawn in flight, a session, or a close in flight.

        A session whose close failed still counts (it is registered until closed). An
        unpublished session whose rollback failed does not: no caller can close it, so it
        would block the owner forever; the owner's disposal retries it instead.
        """
        state = self._owners.get(owner)
        return state is not None and bool(state.pending or state.sessions)

    def get_session(self, owner: Agent, session_id: str) -> BackendSession:
        """Return the backend session behind ``session_id`` for layers that drive it directly."""
        return self._authorize(owner, session_id).session

    def complete_lines_since(
        self, owner: Agent, session_id: str, cursor: int
    ) -> tuple[list[str], int]:
        """Return the session's complete lines numbered ``cursor`` and later, and the next cursor.

        A capability a backend declares by implementing :class:`LineTailSession`; for a
        session whose backend does not, this raises ``UNSUPPORTED``. Authorization is the
        same as every other call (``NO_SESSION``, ``FOREIGN_SESSION``).
        """
        session = self._authorize(owner, session_id).session
        if not isinstance(session, LineTailSession):
            raise TerminalError(
                f"session {session_id} cannot be tailed: its backend session "
                f"({type(session).__name__}) does not provide complete_lines_since(cursor)",
                "UNSUPPORTED",
            )
        return session.complete_lines_since(cursor)

    async def search(self, owner: Agent, session_id: str, request: SearchRequest) -> SearchResult:
        """Return the newest retained lines of the session that match ``request``.

        Authorized as every other call (``NO_SESSION``, ``FOREIGN_SESSION``), then
        searched by :func:`.search.search_session`: ``INVALID_ARGUMENT``, ``UNSUPPORTED``
        without :class:`SearchableSession`, lines numbered as :meth:`read` numbers them.
        """
        session = self._authorize(owner, session_id).session
        return await search_session(session, session_id, request)

    def backend_exports_env(self, kind: str) -> bool:
        """True when the backend registered as ``kind`` declares ``exports_env``.

        False for a type nobody registered: a caller deciding whether to send
        ``export`` lines must not send them to a terminal that is not a shell.
        """
        backend = self._backends.get(kind)
        return backend is not None and bool(backend.exports_env)

    def process_markers(self, owner_id: str) -> builtins.list[dict[str, str]]:
        """The environment markers ``owner_id``'s shells carry, one per marking backend.

        Backends declare a marker by implementing :class:`MarkedBackend`; the others
        contribute nothing. Used to prove an owner left no process behind.
        """
        return [
            dict(backend.process_marker(owner_id))
            for backend in self._backends.values()
            if isinstance(backend, MarkedBackend)
        ]

    def session_type(self, owner: Agent, session_id: str) -> str:
        """Return the backend type of ``session_id``."""
        return self._authorize(owner, session_id).type

    def _authorize(self, owner: Agent, session_id: str) -> _Entry:
        """Find ``session_id`` for ``owner``: ``NO_SESSION`` or ``FOREIGN_SESSION`` otherwise."""
        if not isinstance(session_id, str):
            raise TerminalError("sessionId must be a string", "INVALID_ARGUMENT")
        entry = self._sessions.get(session_id)
        if entry is None:
            raise TerminalError(
                f"no terminal session {session_id!r}",
                "NO_SESSION",
                advice="terminal_list shows the open ones",
            )
        if entry.owner is not owner:
            raise TerminalError(
                f"terminal session {session_id!r} belongs to another agent", "FOREIGN_SESSION"
            )
        return entry

    def _control(self, owner: Agent, session_id: str) -> tuple[BackendSession, HumanControl]:
        entry = self._authorize(owner, session_id)
        return entry.session, entry.human

    # -- session operations ---------------------------------------------------------------

    def start_send(self, owner: Agent, session_id: str, request: SendRequest) -> SendOperation:
        """Reserve the session and start a send; ``SEND_ACTIVE`` if one is already running.

        The backend holds the reservation, because only it knows when cancel signalling
        has settled and the session can take the next send.
        """
        entry = self._authorize(owner, session_id)
        entry.human.refuse_agent()
        if not isinstance(request, SendRequest):
            raise TerminalError("expected a SendRequest", "INVALID_ARGUMENT")
        if not isinstance(request.text, str):
            raise TerminalError("text must be a string", "INVALID_ARGUMENT")
        check_encodable(request.text)
        if request.keys is not None:
            if request.text:
                raise TerminalError("send either text or keys, not both", "INVALID_ARGUMENT")
            if not isinstance(request.keys, tuple) or not all(
                isinstance(key, str) for key in request.keys
            ):
                raise TerminalError("keys must be a tuple of strings", "INVALID_ARGUMENT")
            for key in request.keys:
                check_encodable(key)
        if not isinstance(request.submit, bool):
            raise TerminalError("submit must be a boolean", "INVALID_ARGUMENT")
        if request.cancel is not None and not isinstance(request.cancel, Cancellation):
            raise TerminalError("cancel must be a Cancellation or None", "INVALID_ARGUMENT")
        timeout = request.timeout_ms
        if timeout is not None and (not is_int(timeout) or timeout < 1):
            raise TerminalError(
                f"timeoutMs must be an integer of at least 1, got {timeout!r}", "INVALID_ARGUMENT"
            )
        check_max_bytes(request.max_bytes)
        if request.wait_for is not None:
            compile_line_pattern(request.wait_for, "wait_for")  # the same rules as the tool's
        if request.secret is not None:
            check_secret_send(entry.session, session_id, request)
        op = self._sends.start(session_id, entry.session, request)
        entry.human.track(op)
        return op

    def hidden_prompt(self, owner: Agent, session_id: str) -> str:
        """The prompt line of the hidden-input prompt ``session_id`` waits at now.

        ``NOT_AT_SECRET_PROMPT`` when it is not provably at one (or its backend cannot
        tell, :class:`SecretPromptSession`): a secret sent now would be refused.
        """
        session = self._authorize(owner, session_id).session
        prompt = session.hidden_prompt() if isinstance(session, SecretPromptSession) else None
        if prompt is None:
            raise not_at_secret_prompt(session_id, session)
        return prompt

    def read(self, owner: Agent, session_id: str, request: ReadRequest) -> ReadResult:
        """Return a page of the session's retained output (``offset`` lines, ``count`` long)."""
        entry = self._authorize(owner, session_id)
        if not isinstance(request, ReadRequest):
            raise TerminalError("expected a ReadRequest", "INVALID_ARGUMENT")
        if not is_int(request.offset) or request.offset < 1:
            raise TerminalError(
                "offset must be an integer >= 1 (lines are numbered from 1)", "INVALID_ARGUMENT"
            )
        if not is_int(request.count) or not 1 <= request.count <= MAX_READ_COUNT:
            raise TerminalError(
                f"count must be an integer from 1 to {MAX_READ_COUNT}", "INVALID_ARGUMENT"
            )
        check_max_bytes(request.max_bytes)
        return entry.session.read(request)

    async def signal(self, owner: Agent, session_id: str, sig: str) -> SignalResult:
        """Send ``sig`` (one of :data:`ALLOWED_SIGNALS`) to the session's foreground group."""
        entry = self._authorize(owner, session_id)
        entry.human.refuse_agent()
        if sig not in ALLOWED_SIGNALS:
            raise TerminalError(
                f"signal must be one of {', '.join(ALLOWED_SIGNALS)}", "INVALID_ARGUMENT"
            )
        return await entry.session.signal(sig)

    def resize(self, owner: Agent, session_id: str, rows: int, cols: int) -> TerminalSize:
        """Set the session's window size (``rows`` x ``cols``); the program sees SIGWINCH."""
        entry = self._authorize(owner, session_id)
        entry.human.refuse_agent()
        check_size(rows, cols)
        return entry.session.resize(rows, cols)

    def read_screen(self, owner: Agent, session_id: str) -> ScreenRead:
        """Return a screen session's visible screen; ``INVALID_ARGUMENT`` in line mode."""
        return self._authorize(owner, session_id).session.read_screen()

    async def kill(self, owner: Agent, session_id: str, reason: str) -> bool:
        """Close the session; True if this call closed it, False if a close was in flight.

        The session stays registered until its backend close succeeds, so a failure
        propagates and the session can be killed again. Cancelling the caller does not
        interrupt the close itself.
        """
        entry = self._authorize(owner, session_id)
        joined = entry.closing is not None
        await asyncio.shield(self._close(entry, reason))
        return not joined

    def list(self, owner: Agent) -> builtins.list[Snapshot]:
        """Return snapshots of ``owner``'s sessions in creation order."""
        state = self._owners.get(owner)
        if state is None:
            return []
        entries = sorted(state.sessions.values(), key=lambda e: e.seq)
        return [
            Snapshot(
                session_id=e.session_id,
                name=e.name,
                type=e.type,
                pid=e.session.pid,
                status=e.session.status,
                cwd=e.session.cwd(),
                listening=(
                    e.session.listening() if isinstance(e.session, ListeningSession) else ()
                ),
                opened_by=e.opened_by,
                world=e.world,
            )
            for e in entries
        ]

    def _close(self, entry: _Entry, reason: str) -> asyncio.Task[None]:
        """Return the close task for ``entry``, starting one unless a close is in flight."""
        if entry.closing is None:
            entry.closing = asyncio.ensure_future(self._run_close(entry, reason))
            entry.closing.add_done_callback(_mark_retrieved)
        return entry.closing

    async def _run_close(self, entry: _Entry, reason: str) -> None:
        try:
            await entry.session.close(reason)
        except BaseException:
            entry.closing = None
            raise
        self._sessions.pop(entry.session_id, None)
        entry.human.close()
        state = self._owners.get(entry.owner)
        if state is not None:
            state.sessions.pop(entry.session_id, None)

    # -- disposal -------------------------------------------------------------------------

    async def _dispose_owner(self, owner: Agent) -> None:
        """Owner dispose effect: refuse new spawns, abort pending ones, close every session."""
        state = self._owners.get(owner)
        if state is None:
            return
        state.dead = True
        errors = await self._clean_up([state], owner_not_live(owner), "owner disposed")
        if state.empty and self._owners.get(owner) is state:
            del self._owners[owner]
        if errors:
            raise DisposeError(f"closing the terminal sessions of {owner!r} failed", errors)

    async def dispose(self) -> None:
        """Refuse new spawns, abort pending ones and close every session of every owner.

        Raises :class:`DisposeError` listing each failure, including cleanup failures kept
        from earlier rollbacks. A second call waits for the first and returns.
        """
        if self._disposed is not None:
            await self._disposed.wait()
            return
        self._disposing = True
        self._disposed = asyncio.Event()
        try:
            states = builtins.list(self._owners.values())
            errors = await self._clean_up(states, service_disposing(), "terminal service disposed")
            for owner, state in builtins.list(self._owners.items()):
                if state.empty:
                    state.remove_effect()
                    del self._owners[owner]
        finally:
            self._disposed.set()
        if errors:
            raise DisposeError("disposing the terminal service failed", errors)

    async def _clean_up(
        self, states: Iterable[_OwnerState], abort: TerminalError, reason: str
    ) -> builtins.list[BaseException]:
        """Abort and await pending spawns, then close sessions and orphans; return failures."""
        states = builtins.list(states)
        pending = [p for s in states for p in s.pending.values()]
        for spawn in pending:
            spawn.control.cancel(abort)
        for spawn in pending:
            await spawn.finished.wait()

        closes: builtins.list[tuple[str, asyncio.Future[None]]] = []
        for state in states:
            for entry in builtins.list(state.sessions.values()):
                closes.append((entry.session_id, asyncio.shield(self._close(entry, reason))))
            for session_id, session in builtins.list(state.orphans.items()):
                retry = self._retry_orphan(state, session_id, session, reason)
                closes.append((session_id, asyncio.ensure_future(retry)))
        outcomes = await asyncio.gather(*(fut for _, fut in closes), return_exceptions=True)

        errors: builtins.list[BaseException] = []
        for state in states:
            errors.extend(state.cleanup_errors)
            state.cleanup_errors.clear()
        for (session_id, _), outcome in zip(closes, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                errors.append(_as_cleanup_error(session_id, outcome))
        return errors

    async def _retry_orphan(
        self, state: _OwnerState, session_id: str, session: BackendSession, reason: str
    ) -> None:
        await session.close(reason)
        state.orphans.pop(session_id, None)


# -- helpers ------------------------------------------------------------------------------


def _as_cleanup_error(session_id: str, exc: BaseException) -> BackendCleanupError:
    if isinstance(exc, BackendCleanupError):
        return exc
    error = BackendCleanupError(f"could not close terminal session {session_id}: {exc!r}", exc)
    error.__cause__ = exc
    return error


async def _close_quietly(
    session: BackendSession, session_id: str, reason: str
) -> BackendCleanupError | None:
    """Close an unpublished session; return the failure instead of raising it."""
    try:
        await session.close(reason)
    except Exception as exc:
        return _as_cleanup_error(session_id, exc)
    return None


def _mark_retrieved(task: asyncio.Task[None]) -> None:
    # Close failures reach whoever awaits the close; a close nobody awaits any more
    # (its caller was cancelled) must not be reported again as "never retrieved".
    if not task.cancelled():
        task.exception()


def _nothing() -> None:
    return None
