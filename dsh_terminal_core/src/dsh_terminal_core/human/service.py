"""Watch links and what a person does through them: ``ctx.human`` (SPEC §22).

A watch link is a capability: whoever has its URL sees the session live, and, for a
``control`` link, may take it over. So a link is unguessable (``token_urlsafe(32)``,
256 bits), compared in constant time, valid for a bounded time, and dies with its
session; a dead, expired or guessed link is answered 404 with an empty body.

Links are served under ``/watch/<token>`` by the MCP HTTP server on its own address
when one runs (:meth:`HumanService.serve_at`), otherwise by a loopback server on
127.0.0.1 started on the first link (:mod:`.loopback`). Control returns to the agent
when the person hands back, when the last page holding control closes, or when the
link that took control expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from ..kernel.agents import Agent
from ..kernel.errors import TerminalError
from ..registry import HumanReport, RawInputSession, TerminalSessionService
from ..registry.control import State
from .operator import WATCH_PREFIX, OperatorLinks, OverviewLink, RecordingLink

if TYPE_CHECKING:
    from .app import WatchApp
    from .assets import WebAssets
    from .bytetap import ByteTap
    from .loopback import LoopbackServer

__all__ = [
    "ASK_TTL_S",
    "DEFAULT_TTL_S",
    "MAX_TTL_S",
    "MIN_TTL_S",
    "WATCH_PREFIX",
    "AskOutcome",
    "HumanService",
    "WatchLink",
]

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 3600.0
"""How long a watch link lives unless asked otherwise: an hour."""
MAX_TTL_S = 86400.0
"""The longest a watch link may live: a day."""
MIN_TTL_S = 1.0
ASK_TTL_S = 600.0
"""How long the control link of ``terminal_ask_human`` waits to be used: ten minutes."""

AskOutcome = Literal["handed_back", "declined", "expired", "unavailable"]
Shown = Literal["accept", "decline", "cancel", "unavailable"]


class WatchLink:
    """One link to one session: read-only, or allowed to take control."""

    def __init__(
        self, owner: Agent, session_id: str, *, control: bool, ttl_s: float, base_url: str
    ) -> None:
        self.owner = owner
        self.session_id = session_id
        self.control = control
        self.token = secrets.token_urlsafe(32)
        self.url = f"{base_url.rstrip('/')}{WATCH_PREFIX}{self.token}"
        self.created_at = time.time()
        self.expires_at = self.created_at + ttl_s
        self.state: Literal["open", "expired", "closed"] = "open"
        self.engaged = False  # control was taken through this link
        self.reason = ""  # why the agent asked for help, for terminal_ask_human's link
        #: Set whenever something a page shows changed: control, expiry, the end.
        self.changed = asyncio.Event()
        #: ``terminal_ask_human``'s wait: the person's report, or how the ask ended.
        self.outcome: asyncio.Future[HumanReport | None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def live(self) -> bool:
        return self.state == "open" and time.time() < self.expires_at

    def end(self, state: Literal["expired", "closed"]) -> None:
        if self.state == "open":
            self.state = state
        if self._timer is not None:
            self._timer.cancel()
        if self.outcome is not None and not self.outcome.done():
            self.outcome.set_result(None)
        self.changed.set()


class HumanService:
    """Watch links to owners' sessions, the page behind them, and asking a person for help.

    ``plugin_manager`` carries the ``dsh_ask_human`` hooks through which an in-process
    host shows a link (None: no host can).
    """

    def __init__(
        self,
        terminals: TerminalSessionService,
        plugin_manager: pluggy.PluginManager | None = None,
    ) -> None:
        self.terminals = terminals
        self._pm = plugin_manager
        self._links: dict[str, WatchLink] = {}
        self._base_url: str | None = None
        self._loopback: LoopbackServer | None = None
        self._starting = asyncio.Lock()
        self._app: WatchApp | None = None
        # Per session (by owner and id): the link control was taken through, and how many
        # pages of control links follow it now.
        self._holders: dict[tuple[Agent, str], WatchLink] = {}
        self._control_pages: dict[tuple[Agent, str], int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: The sessions' bytes for the browser terminal (SPEC §31); set by the plugin.
        self.tap: ByteTap | None = None
        #: Where the browser assets are (None: :func:`.assets.default_dir`).
        self.assets_dir: str | None = None
        self._assets: WebAssets | None = None
        #: The operator's links: recordings and overviews.
        self.operator = OperatorLinks()
        #: A live session's recording file, by session id (the recording plugin's).
        self.find_recording: Callable[[str], str | None] = _none
        #: The audit log's file, when one is kept.
        self.find_audit: Callable[[], str | None] = _no_audit
        # The control link an overview hands out per session, kept so it is made once.
        self._overview_links: dict[tuple[str, str], WatchLink] = {}

    # -- where pages are served ---------------------------------------------------------

    @property
    def app(self) -> WatchApp:
        """The ASGI app answering ``/watch/...`` (mounted by the MCP HTTP server)."""
        if self._app is None:
            from .app import WatchApp

            self._app = WatchApp(self)
        return self._app

    def serve_at(self, base_url: str | None) -> None:
        """Make new links point at ``base_url`` (which serves :attr:`app`); None: loopback."""
        self._base_url = base_url

    async def _base(self) -> str:
        if self._base_url is not None:
            return self._base_url
        async with self._starting:
            if self._loopback is None:
                from .loopback import LoopbackServer

                server = LoopbackServer(self.app)
                await server.start()
                self._loopback = server
            return self._loopback.base_url

    def web_assets(self) -> WebAssets | None:
        """The installed browser assets (xterm.js, asciinema-player), or None."""
        if self._assets is None:
            from .assets import load

            self._assets = load(self.assets_dir)
        return self._assets

    # -- links ----------------------------------------------------------------------------

    async def open_link(
        self, owner: Agent, session_id: str, *, control: bool = False, ttl_s: float = DEFAULT_TTL_S
    ) -> WatchLink:
        """A new link to ``owner``'s session ``session_id``, valid for ``ttl_s`` seconds.

        Authorized like every registry call (``NO_SESSION``, ``FOREIGN_SESSION``); a
        control link to a session nobody can type into is ``UNSUPPORTED``.
        """
        if self._closed:
            raise TerminalError("the watch service is closed", "SERVICE_DISPOSING")
        _check_ttl(ttl_s)
        session = self.terminals.get_session(owner, session_id)  # authorizes
        if control and not isinstance(session, RawInputSession):
            raise TerminalError(
                f"session {session_id} cannot be taken over by a person: its backend "
                f"session ({type(session).__name__}) does not provide type_raw(text); "
                "ask for a read-only link (control=false)",
                "UNSUPPORTED",
            )
        link = WatchLink(
            owner, session_id, control=control, ttl_s=ttl_s, base_url=await self._base()
        )
        link._timer = asyncio.get_running_loop().call_later(ttl_s, self._expire, link)
        self._links[link.token] = link
        return link

    # -- the operator's links (SPEC §31) ------------------------------------------------

    async def open_recording(
        self, path: str, *, ttl_s: float | None = DEFAULT_TTL_S, audit: str | None = None
    ) -> RecordingLink:
        """A link to a page that plays the asciicast file ``path``.

        ``audit``: an audit log whose entries about the recorded session the page lists,
        each a link to its moment (default: the harness's own audit log, if kept).
        """
        _check_ttl(ttl_s)
        if not os.path.isfile(path):
            raise TerminalError(f"no recording at {path!r}", "INVALID_ARGUMENT")
        return await self._recording_link(path, ttl_s, audit)

    async def _recording_link(
        self, path: str, ttl_s: float | None, audit: str | None
    ) -> RecordingLink:
        audit = audit if audit is not None else self.find_audit()
        link = RecordingLink(await self._base(), ttl_s, os.path.abspath(path), audit)
        self.operator.add(link)
        return link

    async def open_session_recording(
        self, owner: Agent, session_id: str, *, ttl_s: float | None = DEFAULT_TTL_S
    ) -> RecordingLink:
        """A recording link for ``owner``'s live recorded session (else ``UNSUPPORTED``)."""
        self.terminals.get_session(owner, session_id)  # authorizes
        path = self.find_recording(session_id)
        if path is None:
            raise TerminalError(
                f"session {session_id} is not recorded (the operator sets recording.dir)",
                "UNSUPPORTED",
            )
        _check_ttl(ttl_s)
        # The recorder may not have made the file yet; the page reads it when asked.
        return await self._recording_link(path, ttl_s, None)

    async def open_overview(
        self,
        owner: Agent | Callable[[], Agent | None],
        *,
        label: str | None = None,
        ttl_s: float | None = DEFAULT_TTL_S,
    ) -> OverviewLink:
        """A link to the page of every live session of an identity: give it to the operator.

        ``owner`` is the identity's agent, or a function that finds its agent now (an
        HTTP server's identity outlives its agents). ``ttl_s`` None: until the service
        closes. Never return this to a model: it hands out control links.
        """
        _check_ttl(ttl_s)
        if isinstance(owner, Agent):
            agent = owner
            resolve: Callable[[], Agent | None] = lambda: agent if agent.live else None  # noqa: E731
            label = label or agent.id
        else:
            resolve = owner
        link = OverviewLink(await self._base(), ttl_s, label or "agent", resolve)
        self.operator.add(link)
        return link

    async def overview_watch_link(
        self, overview: OverviewLink, owner: Agent, session_id: str
    ) -> WatchLink:
        """The control link (read-only if control is impossible) an overview shows."""
        key = (overview.token, session_id)
        link = self._overview_links.get(key)
        if link is not None and link.live and link.owner is owner:
            return link
        ttl = DEFAULT_TTL_S
        if overview.expires_at is not None:
            ttl = max(MIN_TTL_S, min(MAX_TTL_S, overview.expires_at - time.time()))
        control = isinstance(self.terminals.get_session(owner, session_id), RawInputSession)
        link = await self.open_link(owner, session_id, control=control, ttl_s=ttl)
        self._overview_links[key] = link
        return link

    def forget_overview_links(self, overview: OverviewLink, keep: set[str]) -> None:
        """Drop the kept links of sessions an overview no longer lists."""
        for key in [k for k in self._overview_links if k[0] == overview.token]:
            if key[1] not in keep:
                del self._overview_links[key]

    def find(self, token: str) -> WatchLink | None:
        """The live link with this token, or None (unknown, expired, or its session gone)."""
        wanted = token.encode("utf-8", "replace")
        found = None
        for candidate, link in self._links.items():
            if secrets.compare_digest(candidate.encode(), wanted):
                found = link
        if found is None:
            return None
        if found.live and not self._session_gone(found):
            return found
        self._forget(found, "expired" if found.state == "expired" else "closed")
        return None

    def _session_gone(self, link: WatchLink) -> bool:
        """Closed (or its owner gone); a session whose shell exited still shows its end."""
        return self.control_state(link) == "closed"

    def _forget(self, link: WatchLink, state: Literal["expired", "closed"]) -> None:
        link.end(state)
        self._links.pop(link.token, None)

    def _expire(self, link: WatchLink) -> None:
        link.end("expired")
        self._links.pop(link.token, None)
        key = (link.owner, link.session_id)
        if self._holders.get(key) is link:
            self._spawn(self._hand_back(link))

    def links_of(self, owner: Agent, session_id: str) -> list[WatchLink]:
        return [
            link
            for link in self._links.values()
            if link.owner is owner and link.session_id == session_id
        ]

    # -- what a page does -----------------------------------------------------------------

    def control_state(self, link: WatchLink) -> State:
        try:
            return self.terminals.control_state(link.owner, link.session_id)
        except TerminalError:
            return "closed"

    async def take(self, link: WatchLink) -> State:
        """Take control through ``link`` (a control link); the state after."""
        assert link.control
        taking = asyncio.ensure_future(self.terminals.take_control(link.owner, link.session_id))
        await asyncio.sleep(0)  # pages hear "taking" while a send in flight settles
        self._changed(link)
        taken = await taking
        if taken:
            self._holders[(link.owner, link.session_id)] = link
            link.engaged = True
        elif (link.owner, link.session_id) in self._holders:
            link.engaged = True
        self._changed(link)
        return self.control_state(link)

    async def hand_back(self, link: WatchLink) -> State:
        """Hand the session back through ``link``; the state after."""
        await self._hand_back(link)
        return self.control_state(link)

    async def _hand_back(self, link: WatchLink) -> None:
        key = (link.owner, link.session_id)
        self._holders.pop(key, None)
        returning = asyncio.ensure_future(self.terminals.hand_back(link.owner, link.session_id))
        await asyncio.sleep(0)
        self._changed(link)
        try:
            report = await returning
        except TerminalError:
            report = None
        for other in [*self.links_of(link.owner, link.session_id), link]:
            if other.engaged and other.outcome is not None and not other.outcome.done():
                other.outcome.set_result(report)
        self._changed(link)

    async def type_keys(self, link: WatchLink, text: str) -> None:
        await self.terminals.type_as_person(link.owner, link.session_id, text)

    def page_opened(self, link: WatchLink) -> None:
        if link.control:
            key = (link.owner, link.session_id)
            self._control_pages[key] = self._control_pages.get(key, 0) + 1

    def page_closed(self, link: WatchLink) -> None:
        """A page's event stream ended; the last control page to go hands back."""
        if not link.control:
            return
        key = (link.owner, link.session_id)
        left = self._control_pages.get(key, 1) - 1
        if left > 0:
            self._control_pages[key] = left
            return
        self._control_pages.pop(key, None)
        holder = self._holders.get(key)
        if holder is not None:
            self._spawn(self._hand_back(holder))

    def _changed(self, link: WatchLink) -> None:
        for other in self.links_of(link.owner, link.session_id):
            other.changed.set()

    # -- asking for help ------------------------------------------------------------------

    async def ask(
        self,
        owner: Agent,
        session_id: str,
        reason: str,
        show: Callable[[WatchLink], Awaitable[Shown]] | None,
        *,
        ttl_s: float = ASK_TTL_S,
    ) -> tuple[AskOutcome, WatchLink, HumanReport | None]:
        """Open a control link, have it shown, and wait for the person to hand back.

        ``show`` puts the link before the person (the MCP client's URL-mode elicitation)
        and says how they answered; without it the ``dsh_ask_human`` hooks of an
        in-process host show it. ``unavailable`` returns at once, the link left open for
        the caller to pass on; ``declined`` withdraws it; ``expired``: unused in time.
        """
        link = await self.open_link(owner, session_id, control=True, ttl_s=ttl_s)
        link.reason = reason
        outcome: asyncio.Future[HumanReport | None] = asyncio.get_running_loop().create_future()
        link.outcome = outcome
        shown = asyncio.ensure_future(show(link) if show is not None else self._show_by_hook(link))
        try:
            waiting: set[asyncio.Future[Any]] = {outcome, shown}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not outcome.done():
                answer = shown.result()
                if answer == "unavailable":
                    return "unavailable", link, None
                if answer != "accept":
                    self._forget(link, "expired")
                    return "declined", link, None
            report = await outcome
        finally:
            if not shown.done():
                shown.cancel()
                with contextlib.suppress(BaseException):
                    await shown
        if report is None:
            return ("handed_back" if link.engaged else "expired"), link, None
        return "handed_back", link, report

    async def _show_by_hook(self, link: WatchLink) -> Shown:
        if self._pm is None or not self._pm.hook.dsh_ask_human.get_hookimpls():
            return "unavailable"
        self._pm.hook.dsh_ask_human(session_id=link.session_id, url=link.url, reason=link.reason)
        return "accept"

    # -- lifetime -------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """End every link (open pages see the end) and stop the loopback server."""
        self._closed = True
        for link in list(self._links.values()):
            self._forget(link, "closed")
        self.operator.clear()
        self._overview_links.clear()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        if self._app is not None:
            await self._app.aclose()
        server, self._loopback = self._loopback, None
        if server is not None:
            await server.aclose()


def _check_ttl(ttl_s: float | None) -> None:
    if ttl_s is not None and not MIN_TTL_S <= ttl_s <= MAX_TTL_S:
        raise TerminalError(
            f"ttlS must be from {MIN_TTL_S:g} to {MAX_TTL_S:g} seconds", "INVALID_ARGUMENT"
        )


def _none(_session_id: str) -> str | None:
    return None


def _no_audit() -> str | None:
    return None
