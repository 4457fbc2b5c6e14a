"""``terminal_watch`` and ``terminal_ask_human``: a person sees a session, and steps in (§22).

Both need ``ctx.human`` (the core ``human`` plugin); without it they answer
``UNSUPPORTED``. A watch link is a capability: whoever has the URL sees the terminal,
and with ``control: true`` may take it over, so the agent should hand a link only to
its own person.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Annotated, Literal, NotRequired, TypedDict

from dsh_terminal_core.human import ASK_TTL_S, DEFAULT_TTL_S, MAX_TTL_S, HumanService
from dsh_terminal_core.human.service import Shown, WatchLink
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.humanask import HumanAsk
from dsh_terminal_core.kernel.resultcap import cap_text
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.registry import HumanReportValue, TerminalSessionService

from .args import SessionId

__all__ = ["AskHumanArgs", "AskHumanValue", "WatchArgs", "WatchValue", "watch_tools"]


class WatchArgs(TypedDict):
    sessionId: SessionId
    control: NotRequired[
        Annotated[
            bool,
            "Allow the person to take control and type (default false: a read-only link).",
        ]
    ]
    ttlS: NotRequired[
        Annotated[
            int,
            Range(1, int(MAX_TTL_S)),
            f"Seconds the link works (default {int(DEFAULT_TTL_S)}, at most {int(MAX_TTL_S)}).",
        ]
    ]


class WatchValue(TypedDict):
    url: str
    control: bool
    expiresAt: Annotated[str, "When the link stops working (ISO 8601, UTC)."]


class AskHumanArgs(TypedDict):
    sessionId: SessionId
    reason: Annotated[str, Text(1, 1000), "What you need the person to do, shown to them."]


class AskHumanValue(TypedDict):
    outcome: Literal["handed_back", "declined", "expired", "unavailable"]
    url: NotRequired[
        Annotated[str, "With outcome 'unavailable': the control link, to give the person."]
    ]
    human: NotRequired[
        Annotated[
            HumanReportValue,
            "With outcome 'handed_back': when, and the lines printed while they typed.",
        ]
    ]


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def watch_tools(
    human: Callable[[], HumanService | None],
    terminals: Callable[[], TerminalSessionService],
    max_result_bytes: int,
) -> list[Tool]:
    """Build the two tools; ``human`` resolves ``ctx.human`` at call time (None: absent)."""
    human = kept_resolution(human)
    terminals = kept_resolution(terminals)

    def finalize(text: str) -> str:
        return cap_text(text, max_result_bytes)

    def service() -> HumanService:
        found = human()
        if found is None:
            raise TerminalError(
                "no watch links here: the 'human' plugin of dsh-terminal-core is not loaded",
                "UNSUPPORTED",
            )
        return found

    def render_watch(args: WatchArgs, value: WatchValue) -> str:
        kind = "control link (the person can take over)" if value["control"] else "read-only link"
        return (
            f"{kind} to {args['sessionId']}, valid until {value['expiresAt']}:\n{value['url']}\n"
            "Anyone with this URL sees the terminal; give it only to your own person."
        )

    @tool(
        "terminal_watch",
        description=(
            "Make a link to a live web page of a terminal session for your person: they "
            "see what the terminal shows as it happens. With control=true they can also "
            "take control and type (your sends are refused with HUMAN_CONTROL until they "
            "hand back; your next result then says what they did). The link is a "
            "capability: give it only to the person you work for."
        ),
        render=render_watch,
        finalize=finalize,
    )
    async def terminal_watch(args: WatchArgs, exec_: ToolExec) -> WatchValue:
        control = args.get("control", False)
        link = await service().open_link(
            exec_.agent,
            args["sessionId"],
            control=control,
            ttl_s=float(args.get("ttlS", int(DEFAULT_TTL_S))),
        )
        return {"url": link.url, "control": control, "expiresAt": _iso(link.expires_at)}

    def render_ask(args: AskHumanArgs, value: AskHumanValue) -> str:
        sid = args["sessionId"]
        outcome = value["outcome"]
        if outcome == "handed_back":
            human_ = value.get("human")
            lines = (
                f"; lines {human_['lineBegin']}-{human_['lineEnd']} are what happened "
                f"meanwhile (terminal_read offset={human_['lineBegin']})"
                if human_ is not None
                else ""
            )
            return f"the person took control of {sid} and handed it back{lines}"
        if outcome == "declined":
            return f"the person declined to take over {sid}"
        if outcome == "expired":
            return f"nobody took over {sid} before the link expired"
        return (
            f"this client cannot show your person a link; give them this control link to "
            f"{sid} some other way (it works for {int(ASK_TTL_S)} s):\n{value.get('url', '')}"
        )

    @tool(
        "terminal_ask_human",
        description=(
            "Ask your person to take over a terminal session: for a prompt you cannot "
            "answer, a login, or a program you cannot drive. They get a control link; the "
            "call returns when they hand back (outcome 'handed_back', with the lines "
            "they produced), decline, or the link expires unused (10 minutes). Outcome "
            "'unavailable': the client cannot show links; pass on the url yourself."
        ),
        render=render_ask,
        finalize=finalize,
    )
    async def terminal_ask_human(args: AskHumanArgs, exec_: ToolExec) -> AskHumanValue:
        session_id = args["sessionId"]
        asker = exec_.ask_human
        show = None
        if asker is not None:

            async def show_by_client(link: WatchLink) -> Shown:
                return await asker(
                    HumanAsk(
                        session_id=session_id,
                        reason=args["reason"],
                        url=link.url,
                        expires_at=link.expires_at,
                    )
                )

            show = show_by_client
        outcome, link, report = await service().ask(exec_.agent, session_id, args["reason"], show)
        value: AskHumanValue = {"outcome": outcome}
        if outcome == "unavailable":
            value["url"] = link.url
        if outcome == "handed_back":
            try:  # reported here, so not again with the next send
                pending = terminals().take_human_report(exec_.agent, session_id)
            except TerminalError:
                pending = None
            report = report or pending
            if report is not None:
                value["human"] = report.to_wire()
        return value

    return [terminal_watch, terminal_ask_human]
