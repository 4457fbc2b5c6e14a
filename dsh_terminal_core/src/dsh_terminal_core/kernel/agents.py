"""Agents: owner identities with an effect scope.

An :class:`Agent` is who owns sessions and jobs. Ownership compares the exact object
(``is``), never the id string, so two agents that happen to share an id never see each
other's terminals. Disposing an agent runs its dispose effects, newest first.

A :class:`Notice` is queued for the agent's next turn and handed at once to every
listener (an MCP server wakes the agent's connected clients with it).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from .errors import DisposeError
from .subscribe import subscribe

__all__ = ["Agent", "EffectScope", "Notice"]

DisposeEffect = Callable[[], Awaitable[None] | None]
NoticeListener = Callable[["Notice"], None]

log = logging.getLogger(__name__)


class EffectScope:
    """Dispose effects run once, newest first, awaited, with failures aggregated.

    A *late* effect runs after every ordinary one, whenever it was added: it releases
    something the ordinary effects still use while they run (a directory the owner's
    sessions write until they are closed).
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._effects: list[DisposeEffect] = []
        self._late_effects: list[DisposeEffect] = []
        self._disposed = False
        self._disposing: asyncio.Future[None] | None = None

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def disposing(self) -> bool:
        return self._disposing is not None

    def add(self, effect: DisposeEffect, *, late: bool = False) -> Callable[[], None]:
        """Register ``effect``; returns a function that removes it unrun.

        ``late=True`` runs it after every ordinary effect. Adding to a scope that is
        disposing or disposed raises, because the effect would never run and whatever it
        guards would leak.
        """
        if self._disposing is not None:
            raise RuntimeError(f"{self._label} is disposed; cannot add a dispose effect")
        return subscribe(self._late_effects if late else self._effects, effect)

    async def dispose(self) -> None:
        """Run every effect newest first; raise :class:`DisposeError` naming each failure.

        A second call waits for the first and returns without running anything again.
        """
        if self._disposing is not None:
            await asyncio.shield(self._disposing)
            return
        self._disposing = asyncio.get_running_loop().create_future()
        errors: list[BaseException] = []
        try:
            for effects in (self._effects, self._late_effects):
                while effects:
                    effect = effects.pop()
                    try:
                        outcome = effect()
                        if inspect.isawaitable(outcome):
                            await outcome
                    except Exception as exc:
                        errors.append(exc)
        finally:
            self._disposed = True
            self._disposing.set_result(None)
        if errors:
            raise DisposeError(f"disposing {self._label} failed", errors)


@attrs.frozen(kw_only=True)
class Notice:
    """Something that happened for an agent outside its current call (e.g. a job ended)."""

    kind: str
    text: str
    data: dict[str, object] = attrs.field(factory=dict)

    def to_wire(self) -> dict[str, object]:
        """``{kind, text, ...}`` with the data's JSON scalars: as a result's ``notices`` has it."""
        wire: dict[str, object] = {"kind": self.kind, "text": self.text}
        for key, value in self.data.items():
            if key not in wire and (value is None or isinstance(value, (str, int, float, bool))):
                wire[key] = value
        return wire


def _log_failed_arrival(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("an expected arrival failed: %s", exc)


class Agent:
    """An owner identity. Compare with ``is``; ``id`` is only a label."""

    __slots__ = ("__weakref__", "_arrivals", "_listeners", "_notices", "_scope", "id")

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id
        self._scope = EffectScope(f"agent {agent_id!r}")
        self._notices: list[Notice] = []
        self._listeners: list[NoticeListener] = []
        self._arrivals: list[asyncio.Future[Any]] = []

    def __repr__(self) -> str:
        return f"<Agent {self.id!r} at {id(self):#x}>"

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def live(self) -> bool:
        """True until disposal starts."""
        return not self._scope.disposing

    def expect(self, arrival: Awaitable[Any]) -> None:
        """Something this agent's first call should wait for (its sessions coming back).

        A plugin adds it when the agent is created (``dsh_agent_created``); a failure is
        the plugin's to report, never the call's.
        """
        future = asyncio.ensure_future(arrival)
        future.add_done_callback(_log_failed_arrival)
        self._arrivals.append(future)

    @property
    def expecting(self) -> bool:
        """True while something :meth:`expect` was given may still be on its way.

        Lets a caller skip awaiting :meth:`arrived` (a coroutine per call) when nothing is.
        """
        return bool(self._arrivals)

    async def arrived(self, timeout_s: float | None = None) -> None:
        """Wait for what was expected (at most ``timeout_s``); instant when nothing is."""
        if not self._arrivals:
            return
        pending = [arrival for arrival in self._arrivals if not arrival.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self._arrivals = [arrival for arrival in self._arrivals if not arrival.done()]

    @property
    def disposed(self) -> bool:
        return self._scope.disposed

    def on_dispose(self, effect: DisposeEffect, *, late: bool = False) -> Callable[[], None]:
        """Run ``effect`` when this agent is disposed; returns a remover.

        ``late=True`` runs it after every ordinary effect (see :class:`EffectScope`).
        """
        return self._scope.add(effect, late=late)

    async def dispose(self) -> None:
        """Run every dispose effect (newest first); harmless to call twice."""
        await self._scope.dispose()

    def notify(self, notice: Notice) -> None:
        """Queue a notice for this agent's next turn, then hand it to every listener.

        Listeners run synchronously, oldest first, on the caller's thread. One that
        raises is logged and skipped: the notice stays queued and the others still run,
        because a broken client connection must not hide the notice from the next turn.
        """
        self._notices.append(notice)
        for listener in tuple(self._listeners):
            try:
                listener(notice)
            except Exception:
                log.exception("a notice listener of agent %r failed", self.id)

    def on_notice(self, listener: NoticeListener) -> Callable[[], None]:
        """Call ``listener`` with every notice from now on; returns a remover.

        The remover is harmless to call twice. Listeners must not block: they run
        inside :meth:`notify` (a listener that has real work to do schedules it).
        """
        return subscribe(self._listeners, listener)

    def drain_notices(self) -> list[Notice]:
        """Return and clear the queued notices, oldest first."""
        notices, self._notices = self._notices, []
        return notices

    def withdraw_notices(self, stale: Callable[[Notice], bool]) -> int:
        """Drop the queued notices ``stale`` selects; return how many were dropped.

        For news the agent has had another way, so the next turn does not repeat it
        (``job_output`` that reports a job's end withdraws that job's end notice).
        Listeners already had them; that is not undone.
        """
        kept = [notice for notice in self._notices if not stale(notice)]
        dropped = len(self._notices) - len(kept)
        self._notices = kept
        return dropped
