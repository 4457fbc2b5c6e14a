"""The operator's pages (SPEC §31): a recording played, an identity's sessions at a glance.

* A recording link: ``GET /watch/<token>`` plays the session's ``.cast`` with
  asciinema-player (``/watch/<token>/cast`` is the file), and lists the audit log's
  entries about that session, each a link to its moment (``#t=<seconds>``: the page
  seeks the player there; opened with one, it starts there). Pinned: ``#player``,
  ``#audit`` (``a[data-t]`` per entry); ``window.dshPlayer`` is the player, and
  ``document.body.dataset.played`` becomes ``ended`` when it played to its end.
* An overview link: ``GET /watch/<token>`` lists every live session of the identity
  (``#sessions``, one ``.session[data-id]`` each) with a live thumbnail (the text the
  terminal shows), its state — ``running``, ``waiting for keys``, ``a person in
  control``, ``exited`` — and its watch link (a control link, made for the overview);
  ``/watch/<token>/events`` pushes the list whenever it changes.

Everything else under such a token is 404, as for a watch link, and nothing can be
posted here.
"""

from __future__ import annotations

import asyncio
import datetime
import html
import json
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kernel.errors import TerminalError
from ..registry import WatchedSession
from .assets import WebAssets
from .follow import follow
from .respond import Receive, Scope, Send, empty, event, start_events, whole
from .service import WATCH_PREFIX
from .views import text_view

if TYPE_CHECKING:
    from .app import WatchApp
    from .operator import OverviewLink, RecordingLink
    from .service import HumanService

__all__ = ["serve_asset", "serve_overview", "serve_recording"]

# How often an overview looks again for sessions opened or closed, and the least time
# between two pushes of its list (output faster than this is coalesced).
_LIST_POLL_S = 0.5
_LIST_GAP_S = 0.2
_THUMB_ROWS = 24
_INSTALL = "run scripts/install.sh (or python -m dsh_terminal_core.human.assets)"


def _csp(nonce: str, *, wasm: bool = False) -> list[tuple[bytes, bytes]]:
    from .app import page_csp

    return [(b"content-security-policy", page_csp(nonce, wasm=wasm))]


async def serve_asset(assets: WebAssets | None, name: str, send: Send) -> None:
    """One of the browser files, to a link's holder; 404 for anything else."""
    found = assets.read(name) if assets is not None else None
    if found is None:
        await empty(send, 404)
        return
    body, kind = found
    await whole(send, 200, body, kind)


# -- recordings -----------------------------------------------------------------------


async def serve_recording(
    service: HumanService, link: RecordingLink, rest: str, scope: Scope, send: Send
) -> None:
    method = scope["method"]
    if rest == "" and method in {"GET", "HEAD"}:
        nonce = secrets.token_urlsafe(16)
        body = (await asyncio.to_thread(_recording_page, service, link, nonce)).encode()
        await whole(
            send,
            200,
            b"" if method == "HEAD" else body,
            b"text/html; charset=utf-8",
            _csp(nonce, wasm=True),
        )
    elif rest == "cast" and method == "GET":
        try:
            data = await asyncio.to_thread(Path(link.path).read_bytes)
        except OSError:
            await empty(send, 404)
            return
        await whole(send, 200, data, b"text/plain; charset=utf-8")
    elif rest.startswith("asset/") and method == "GET":
        await serve_asset(service.web_assets(), rest[len("asset/") :], send)
    else:
        await empty(send, 404)


def _cast_header(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as cast:
            header = json.loads(cast.readline())
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def audit_moments(audit: str | None, header: dict[str, Any]) -> list[dict[str, Any]]:
    """The audit entries about the recorded session, each with ``t``: seconds into it.

    The recording's start is its header's ``timestamp`` (whole seconds, as asciicast v2
    has it), so a moment can be up to a second late; an entry's ``ts`` is when the call
    began.
    """
    session_id = header.get("title")
    start = header.get("timestamp")
    if audit is None or not isinstance(session_id, str) or not isinstance(start, int | float):
        return []
    moments = []
    try:
        with open(audit, encoding="utf-8") as lines:
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("sessionId") != session_id:
                    continue
                try:
                    began = datetime.datetime.fromisoformat(str(entry.get("ts"))).timestamp()
                except ValueError:
                    continue
                moments.append({**entry, "t": round(max(0.0, began - start), 3)})
    except OSError:
        return []
    return moments


def _recording_page(service: HumanService, link: RecordingLink, nonce: str) -> str:
    header = _cast_header(link.path)
    title = html.escape(str(header.get("title", Path(link.path).name)))
    base = f"{WATCH_PREFIX}{link.token}"
    items = []
    for entry in audit_moments(link.audit, header):
        outcome = entry.get("outcome")
        outcome = outcome if isinstance(outcome, dict) else {}
        said = "error " + str(outcome.get("code", "")) if outcome.get("isError") else "ok"
        args = entry.get("args")
        args = args if isinstance(args, dict) else {}
        text = args.get("text")
        text = text if isinstance(text, str) else ""
        items.append(
            f'<li><a href="#t={entry["t"]}" data-t="{entry["t"]}">{entry["t"]:.1f} s</a> '
            f"{html.escape(str(entry.get('tool', '')))} {html.escape(text[:80])} "
            f"<small>({html.escape(said)})</small></li>"
        )
    audit = (
        f'<h2>Audit log</h2><ol id="audit">{"".join(items)}</ol>'
        if link.audit is not None
        else '<p class="note">No audit log is kept; its entries would link here.</p>'
    )
    assets = service.web_assets()
    if assets is None:
        player = (
            f'<p id="mode" data-mode="none">The player (asciinema-player) is not installed '
            f"on this server: {html.escape(_INSTALL)}. The recording itself: "
            f'<a href="{base}/cast">{title}.cast</a>.</p>'
        )
        scripts = ""
    else:
        player = '<div id="player"></div>'
        scripts = (
            f'<script nonce="{nonce}" src="{base}/asset/asciinema-player.js"></script>'
            f'<script nonce="{nonce}">{_PLAYER}</script>'
        )
    style = f'<link rel="stylesheet" href="{base}/asset/asciinema-player.css">' if assets else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="referrer" content="no-referrer">'
        f"<title>Recording {title}</title><style>{_STYLE}</style>{style}</head>"
        f'<body data-played="no" data-cols="{int(header.get("width", 80))}" '
        f'data-rows="{int(header.get("height", 24))}">'
        f"<h1>Recording of session {title}</h1>{player}{audit}{scripts}</body></html>"
    )


_STYLE = """
body{font-family:sans-serif;margin:1em;background:#fafafa}
#player{max-width:60em}
.note{color:#555}
.session{display:inline-block;vertical-align:top;margin:.5em;padding:.5em;background:#fff;
border:1px solid #ccc;border-radius:4px;width:26em}
.session pre{background:#111;color:#ddd;font:7px/1.15 monospace;padding:.4em;margin:.4em 0;
white-space:pre;overflow:hidden;height:20em}
.state{font-weight:bold}
"""

_PLAYER = r"""
(function () {
  const base = location.pathname.replace(/\/+$/, "");
  function moment() {
    const m = /t=([0-9.]+)/.exec(location.hash);
    return m ? Number(m[1]) : 0;
  }
  const start = moment();
  const player = AsciinemaPlayer.create(base + "/cast", document.getElementById("player"), {
    cols: Number(document.body.dataset.cols), rows: Number(document.body.dataset.rows),
    startAt: start, preload: true, autoPlay: false, fit: false
  });
  window.dshPlayer = player;
  player.addEventListener("ended", () => { document.body.dataset.played = "ended"; });
  player.addEventListener("playing", () => { document.body.dataset.played = "playing"; });
  for (const a of document.querySelectorAll("#audit a[data-t]")) {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      history.replaceState(null, "", "#t=" + a.dataset.t);
      player.seek(Number(a.dataset.t));
    });
  }
})();
"""

# -- overviews ------------------------------------------------------------------------


async def serve_overview(
    app: WatchApp,
    service: HumanService,
    link: OverviewLink,
    rest: str,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    method = scope["method"]
    if rest == "" and method in {"GET", "HEAD"}:
        nonce = secrets.token_urlsafe(16)
        body = _overview_page(link, nonce).encode()
        await whole(
            send, 200, b"" if method == "HEAD" else body, b"text/html; charset=utf-8", _csp(nonce)
        )
    elif rest == "events" and method == "GET":
        await _overview_events(app, service, link, receive, send)
    else:
        await empty(send, 404)


def _overview_page(link: OverviewLink, nonce: str) -> str:
    label = html.escape(link.label)
    until = (
        "until the server stops"
        if link.expires_at is None
        else time.strftime("until %Y-%m-%d %H:%M:%S UTC", time.gmtime(link.expires_at))
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="referrer" content="no-referrer">'
        f"<title>Sessions of {label}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Sessions of {label}</h1>"
        '<p class="note">Every live session of this identity, as it is now. Each watch link '
        f"lets you take control. This page works {until}.</p>"
        '<p id="count" aria-live="polite"></p><div id="sessions"></div>'
        f'<script nonce="{nonce}">{_OVERVIEW}</script></body></html>'
    )


_OVERVIEW = r"""
(function () {
  const base = location.pathname.replace(/\/+$/, "");
  const list = document.getElementById("sessions");
  const events = new EventSource(base + "/events");
  function card(s) {
    let el = list.querySelector('.session[data-id="' + CSS.escape(s.id) + '"]');
    if (!el) {
      el = document.createElement("div");
      el.className = "session";
      el.dataset.id = s.id;
      const h = document.createElement("h2");
      const state = document.createElement("p");
      state.className = "state";
      const thumb = document.createElement("pre");
      thumb.className = "thumb";
      const watch = document.createElement("a");
      watch.className = "watch";
      watch.textContent = "watch / take control";
      watch.target = "_blank";
      watch.rel = "noopener noreferrer";
      el.append(h, state, thumb, watch);
      list.append(el);
    }
    el.querySelector("h2").textContent = s.id + (s.name ? " (" + s.name + ")" : "") +
      " — " + s.type;
    el.querySelector(".state").textContent = s.state;
    el.dataset.state = s.state;
    el.querySelector(".thumb").textContent = s.thumb;
    el.querySelector(".watch").href = s.watch;
    return el;
  }
  events.addEventListener("sessions", (e) => {
    const sessions = JSON.parse(e.data).sessions;
    const keep = new Set(sessions.map((s) => s.id));
    for (const el of [...list.children]) if (!keep.has(el.dataset.id)) el.remove();
    for (const s of sessions) list.append(card(s));
    document.getElementById("count").textContent = sessions.length + " live session" +
      (sessions.length === 1 ? "" : "s");
  });
  events.addEventListener("end", () => {
    events.close();
    document.getElementById("count").textContent = "This link has ended.";
    document.body.dataset.ended = "yes";
  });
})();
"""


def _state(service: HumanService, owner: Any, session_id: str, status: str) -> str:
    if status != "running":
        return "exited"
    control = service.terminals.control_state(owner, session_id)
    if control in ("person", "taking", "returning"):
        return "a person in control"
    tapped = service.tap.of(session_id) if service.tap is not None else None
    return tapped.activity if tapped is not None else "running"


async def _overview_events(
    app: WatchApp, service: HumanService, link: OverviewLink, receive: Receive, send: Send
) -> None:
    await start_events(send)
    wake = asyncio.Event()
    watching: dict[str, Any] = {}  # session id -> remover of its output watch
    shown: dict[str, Any] = {"list": None}
    closing = app.closing_event()

    async def step() -> bool:
        owner = link.resolve()
        if closing.is_set() or not link.live or service.operator.find(link.token) is None:
            await event(send, "end", {"reason": "expired" if not link.live else "closed"})
            return False
        sessions = []
        # No agent now: the identity is not connected, or was reaped.
        snapshots = [] if owner is None else service.terminals.list(owner)
        for snap in snapshots:
            assert owner is not None
            sid = snap.session_id
            try:
                if sid not in watching:
                    session = service.terminals.get_session(owner, sid)
                    watching[sid] = (
                        session.watch(wake.set) if isinstance(session, WatchedSession) else None
                    )
                watch = await service.overview_watch_link(link, owner, sid)
                view, _ = text_view(service, owner, sid, None, lines=_THUMB_ROWS)
            except TerminalError:
                continue  # closed meanwhile
            status = str(view.get("status", "running"))
            sessions.append(
                {
                    "id": sid,
                    "name": snap.name,
                    "type": snap.type,
                    "status": status,
                    "state": _state(service, owner, sid, status),
                    "thumb": view.get("text", ""),
                    "watch": watch.url,
                }
            )
        listed = {s["id"] for s in sessions}
        for sid in [s for s in watching if s not in listed]:
            remove = watching.pop(sid)
            if remove is not None:
                remove()
        service.forget_overview_links(link, listed)
        if sessions != shown["list"]:
            shown["list"] = sessions
            await event(send, "sessions", {"label": link.label, "sessions": sessions})
        return True

    stop = service.tap.watch_activity(wake.set) if service.tap is not None else None
    try:
        await follow(receive, send, (wake, closing), step, gap_s=_LIST_GAP_S, poll_s=_LIST_POLL_S)
    finally:
        if stop is not None:
            stop()
        for remove in watching.values():
            if remove is not None:
                remove()
