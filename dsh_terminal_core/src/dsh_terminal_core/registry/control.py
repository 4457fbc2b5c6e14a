"""Who types into a session: the agent, or a person who took control of it (SPEC §22).

Each published session has one :class:`HumanControl`. While a person holds control the
agent's sends, signals and resizes are refused with ``HUMAN_CONTROL`` (its reads still
work), and the person's keys reach the terminal raw through the backend's
:class:`~.types.RawInputSession`. The rules, kept here for every backend:

* a send in flight when control is asked for settles first: taking control waits for
  it (the person waits, never the agent's command), and from the moment of asking no new
  agent send starts;
* handing back waits, briefly (:data:`HAND_BACK_SETTLE_MS`), for what the person started
  to settle on the same readiness ladder as a send without input, so the agent's next
  send never settles on the prompt that answers the person's command;
* the agent hears of both through notices (``human_control``, ``human_returned``), and
  its next send or read result carries the person's time, once, as
  :class:`~.types.HumanReport`.

:class:`HumanGate` is the part of :class:`~.service.TerminalSessionService` that does
this; it lives apart so the service stays one job per module.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ..kernel.agents import Agent, Notice
from ..kernel.errors import TerminalError
from ..kernel.subscribe import subscribe
from .types import (
    HumanReport,
    RawInputSession,
    ReadRequest,
    SendOperation,
    SendRequest,
    SendResult,
)

if TYPE_CHECKING:
    from .types import BackendSession

__all__ = ["HAND_BACK_SETTLE_MS", "MAX_RAW_CHARS", "HumanControl", "HumanGate", "State"]

HAND_BACK_SETTLE_MS = 2000
"""How long handing back waits for the person's last command to settle before the agent
may send again (a program the person left running keeps running; the agent sees it)."""

MAX_RAW_CHARS = 4096
"""The most one raw write from a person carries (a paste is split by the page)."""

State = Literal["agent", "taking", "person", "returning", "closed"]


class HumanControl:
    """The control state of one session, and the report the agent has not seen yet."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._state: State = "agent"
        self._watchers: list[Callable[[], None]] = []
        # The agent's latest send, held weakly: a settled send is freed with its result.
        self._inflight: Callable[[], SendOperation | None] = _nothing
        self._took_at = 0.0
        self._line_begin = 0
        self._report: HumanReport | None = None

    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        self._state = state
        for callback in list(self._watchers):
            callback()

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every change of :attr:`state`; returns a remover."""
        return subscribe(self._watchers, callback)

    @property
    def held(self) -> bool:
        """True while a person holds control (or it is being taken or handed back)."""
        return self.state in ("taking", "person", "returning")

    def refuse_agent(self) -> None:
        """Raise ``HUMAN_CONTROL`` when the agent may not type, signal or resize now."""
        if self.held:
            raise TerminalError(
                f"a person is typing in session {self.session_id} (they took control "
                "through a watch link); nothing was sent. terminal_read shows what they "
                "do; your next send works once they hand back",
                "HUMAN_CONTROL",
                advice="wait for the human_returned notice, then send again",
            )

    def track(self, op: SendOperation) -> None:
        """Remember ``op`` as the agent's latest send (in flight until ``op.done``).

        A weak reference, not a callback on ``op.done``: every send passes here, and a
        done callback costs a loop turn's handle per send where this costs one object.
        """
        try:
            self._inflight = weakref.ref(op)
        except TypeError:  # a backend's operation without weak references: held until the next
            self._inflight = lambda: op

    def _send_in_flight(self) -> SendOperation | None:
        op = self._inflight()
        return op if op is not None and not op.done.done() else None

    def take_report(self) -> HumanReport | None:
        """The person's last time in control, once; None when there is nothing new."""
        report, self._report = self._report, None
        return report

    def close(self) -> None:
        """The session is gone: control ends with it, and nothing is reported."""
        self.state = "closed"


def _nothing() -> None:
    return None


def _lines(session: BackendSession) -> int:
    return session.read(ReadRequest(offset=1, count=1)).total_lines


class HumanGate:
    """Taking control, typing as a person and handing back, for the service's sessions.

    A mixin of :class:`~.service.TerminalSessionService`: ``_control(owner, id)``
    authorizes like every other call (``NO_SESSION``, ``FOREIGN_SESSION``).
    """

    def _control(self, owner: Agent, session_id: str) -> tuple[BackendSession, HumanControl]:
        raise NotImplementedError

    def control_state(self, owner: Agent, session_id: str) -> State:
        """``agent``, ``taking``, ``person``, ``returning`` (or ``closed``) for the session."""
        return self._control(owner, session_id)[1].state

    def watch_control(
        self, owner: Agent, session_id: str, callback: Callable[[], None]
    ) -> Callable[[], None]:
        """Call ``callback`` whenever control of the session changes hands, or it closes."""
        return self._control(owner, session_id)[1].watch(callback)

    def in_human_control(self, owner: Agent, session_id: str) -> bool:
        """True while a person holds control of the session (or is taking it)."""
        return self._control(owner, session_id)[1].held

    async def take_control(self, owner: Agent, session_id: str) -> bool:
        """Put the session in a person's control; False when a person already held it.

        Refuses ``UNSUPPORTED`` for a backend session a person cannot type into
        (:class:`RawInputSession`) and ``SESSION_EXITED`` for an ended one. From the
        call on the agent is refused; control is the person's once the agent's send in
        flight (if any) has settled. A cancelled call leaves control with the agent.
        """
        session, control = self._control(owner, session_id)
        if not isinstance(session, RawInputSession):
            raise TerminalError(
                f"session {session_id} cannot be taken over: its backend session "
                f"({type(session).__name__}) does not provide type_raw(text)",
                "UNSUPPORTED",
            )
        if control.held:
            return False
        if session.status.kind == "exited":
            raise TerminalError(f"session {session_id} has ended", "SESSION_EXITED")
        control.state = "taking"
        try:
            inflight = control._send_in_flight()
            if inflight is not None:
                await asyncio.wait({inflight.done})
        except BaseException:
            if control.state == "taking":
                control.state = "agent"
            raise
        if control.state != "taking":  # closed meanwhile
            raise TerminalError(f"session {session_id} was closed", "SESSION_CLOSED")
        control.state = "person"
        control._took_at = time.time()
        control._line_begin = max(1, _lines(session))  # the line they type on
        control._report = None
        _notify(
            owner,
            "human_control",
            session_id,
            f"a person took control of {session_id}: your sends, signals and resizes "
            "there are refused (HUMAN_CONTROL) until they hand back; terminal_read shows "
            "what they do",
        )
        return True

    async def type_as_person(self, owner: Agent, session_id: str, text: str) -> None:
        """Write a person's keys to the terminal as they are; only while they hold control.

        ``INVALID_ARGUMENT`` for more than :data:`MAX_RAW_CHARS` characters or text with
        no UTF-8 form; ``HUMAN_CONTROL`` (with a message for the person) when control is
        not theirs.
        """
        session, control = self._control(owner, session_id)
        if control.state != "person":
            raise TerminalError(
                f"take control of session {session_id} before typing", "HUMAN_CONTROL"
            )
        if not isinstance(text, str) or len(text) > MAX_RAW_CHARS:
            raise TerminalError(
                f"keys must be a string of at most {MAX_RAW_CHARS} characters", "INVALID_ARGUMENT"
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise TerminalError("keys are not valid Unicode", "INVALID_ARGUMENT") from None
        assert isinstance(session, RawInputSession)
        await session.type_raw(text)

    async def hand_back(self, owner: Agent, session_id: str) -> HumanReport | None:
        """Return control to the agent; the report of the person's time, or None if not held.

        Waits up to :data:`HAND_BACK_SETTLE_MS` for what the person started to settle,
        then reports the lines printed since control was taken. The agent's next send or
        read result carries the report (:meth:`take_human_report`).
        """
        session, control = self._control(owner, session_id)
        if control.state != "person":
            return None
        control.state = "returning"
        try:
            await _settle(session)
        finally:
            if control.state == "returning":
                control.state = "agent"
        if _closed(control):
            return None
        report = HumanReport(
            took_control_at=control._took_at,
            handed_back_at=time.time(),
            line_begin=control._line_begin,
            line_end=_lines(session),
        )
        control._report = report
        wire = report.to_wire()
        _notify(
            owner,
            "human_returned",
            session_id,
            f"the person handed {session_id} back after "
            f"{report.handed_back_at - report.took_control_at:.0f} s; lines "
            f"{wire['lineBegin']}-{wire['lineEnd']} are what happened meanwhile "
            f"(terminal_read offset={wire['lineBegin']}); you may send again",
        )
        return report

    def take_human_report(self, owner: Agent, session_id: str) -> HumanReport | None:
        """The person's time in control not yet reported to the agent, once."""
        return self._control(owner, session_id)[1].take_report()


async def _settle(session: BackendSession) -> None:
    """Wait, bounded, for the terminal to settle after the person's last key.

    The wait types nothing and is never cancelled: cancelling a send interrupts the
    foreground, which is the person's program. It ends by itself within its timeout.
    """
    try:
        op = session.start_send(SendRequest(text="", submit=False, timeout_ms=HAND_BACK_SETTLE_MS))
    except TerminalError:
        return  # ended, closing, or busy: nothing of the person's to wait for
    op.done.add_done_callback(_retrieve)
    await asyncio.wait({op.done})


def _closed(control: HumanControl) -> bool:
    return control.state == "closed"


def _retrieve(future: asyncio.Future[SendResult]) -> None:
    if not future.cancelled():
        future.exception()


def _notify(owner: Agent, kind: str, session_id: str, text: str) -> None:
    if owner.live:
        owner.notify(Notice(kind=kind, text=text, data={"sessionId": session_id}))
