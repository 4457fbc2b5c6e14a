"""What the registry tells observers: which session a spawn is for, and every send.

A layer above the registry (the recorder, SPEC §23) sees every terminal through two
facts only the registry knows: the session a backend's spawn is creating (read with
:func:`spawning_session` from a process wrapper the provider calls during that spawn)
and each send as it starts and settles (:class:`~.types.SendObserver`).
"""

from __future__ import annotations

import builtins
import contextvars
from collections.abc import Callable

from ..kernel.subscribe import subscribe
from .types import (
    BackendSession,
    BackendSpawnContext,
    SendObserver,
    SendOperation,
    SendRequest,
    TerminalBackend,
)

__all__ = ["SendObservers", "spawn_announced", "spawning_session"]

_SPAWNING: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dsh_spawning_session", default=None
)


def spawning_session() -> str | None:
    """The id of the session whose backend spawn runs in this context, or None.

    Set while :meth:`TerminalSessionService.spawn` awaits its backend, so a process
    wrapper the provider calls during that spawn can tell which session it serves.
    """
    return _SPAWNING.get()


async def spawn_announced(backend: TerminalBackend, context: BackendSpawnContext) -> BackendSession:
    """Await ``backend.spawn(context)`` with :func:`spawning_session` naming the session."""
    token = _SPAWNING.set(context.session_id)
    try:
        return await backend.spawn(context)
    finally:
        _SPAWNING.reset(token)


class SendObservers:
    """The registry's send observers, and the one way it starts a send."""

    def __init__(self) -> None:
        self._observers: builtins.list[SendObserver] = []

    def add(self, observer: SendObserver) -> Callable[[], None]:
        """Tell ``observer`` of every send from now on; returns a function that stops it."""
        return subscribe(self._observers, observer)

    def start(
        self, session_id: str, session: BackendSession, request: SendRequest
    ) -> SendOperation:
        """``session.start_send(request)``, with every observer told before and after."""
        if not self._observers:
            return session.start_send(request)
        observers = builtins.list(self._observers)
        for observer in observers:
            observer.before_send(session_id, request)
        operation: SendOperation | None = None
        try:
            operation = session.start_send(request)
        finally:
            for observer in observers:
                observer.after_send(session_id, request, operation)
        return operation
