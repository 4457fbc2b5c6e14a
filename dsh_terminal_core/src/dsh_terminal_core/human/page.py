"""The watch page: the terminal as a person sees it, live, and the control buttons.

Pinned ids (tests and people's scripts rely on them): ``#terminal`` holds the terminal;
a control link's page has ``#take-control`` and ``#hand-back``, a read-only link's page
has neither; ``#state`` says who has control; ``#mode`` says how the terminal is shown.

Two ways to show it. The real terminal (SPEC §31): xterm.js, loaded from this server
(``asset/xterm.js``), is fed the session's own bytes from ``/stream`` — the retained
output replayed, then each new piece — at the session's size, so colours, the cursor,
the alternate screen and resizes are the program's own; while the person holds control
their keys go to ``/keys`` as xterm.js encodes them (the program's cursor-key mode
included). The page's script keeps the terminal in ``window.dshTerm`` for people's
scripts and tests. The text view (SPEC §22), when the assets are not installed or the
session's bytes are not tapped: the text of ``/events`` in ``#terminal``, keys encoded
by the page (Enter, Backspace, Tab, Escape, arrows, Home, End, Delete, Ctrl-letters,
printable text, pastes); ``#mode`` says why. Either way the page carries no token other
than the link's own path, which the page already is.
"""

from __future__ import annotations

import html
import json
import time
from typing import TYPE_CHECKING

from .service import WATCH_PREFIX

if TYPE_CHECKING:
    from .service import WatchLink

__all__ = ["render_page"]

_STYLE = """
body{font-family:sans-serif;margin:1em;background:#fafafa}
#terminal{background:#111;color:#ddd;font:14px/1.25 monospace;padding:.6em;white-space:pre;
overflow:auto;min-height:20em;max-height:75vh;border:3px solid #111;outline:none}
#terminal.mine{border-color:#c60}
div#terminal{display:inline-block;min-height:0;max-height:none;overflow:visible;padding:.3em}
button{font-size:1em;margin:.5em .5em .5em 0}
.note{color:#555}
"""

_COMMON = r"""
window.dshPage = (function () {
  const base = location.pathname.replace(/\/+$/, "");
  const stateEl = document.getElementById("state");
  const take = document.getElementById("take-control");
  const back = document.getElementById("hand-back");
  const page = {base: base, control: "agent", onState: () => {}};
  const words = {
    agent: "The agent has control. You are watching.",
    taking: "Taking control: waiting for the agent's command to settle…",
    person: "You have control: your keys go to the terminal. Hand back when done.",
    returning: "Handing back…",
    closed: "The session is closed."
  };
  page.show = function (state) {
    page.control = state;
    stateEl.textContent = words[state] || state;
    document.body.dataset.control = state;
    if (take) take.disabled = state !== "agent";
    if (back) back.disabled = state !== "person";
    page.onState(state);
  };
  page.ended = function (reason) {
    page.show("closed");
    stateEl.textContent = "This link has " +
      (reason === "expired" ? "expired." : "ended: the session closed.");
  };
  function post(what, body) {
    return fetch(base + "/" + what, {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body),
      credentials: "omit",
      referrerPolicy: "no-referrer"
    }).then((r) => r.json().catch(() => ({})));
  }
  // Keys go out in order: one request at a time, what was typed meanwhile in the next.
  let pending = "";
  let sending = Promise.resolve();
  page.flush = function () {
    sending = sending.then(() => {
      if (!pending) return;
      const data = pending;
      pending = "";
      return post("keys", {data: data});
    });
    return sending;
  };
  page.type = function (text) {
    if (page.control !== "person" || !text) return;
    pending += text;
    page.flush();
  };
  if (take) take.addEventListener("click", () => {
    page.show("taking");
    post("control", {action: "take"}).then((r) => r.state && page.show(r.state));
  });
  if (back) back.addEventListener("click", () => {
    page.flush().then(() => {
      page.show("returning");
      return post("control", {action: "hand_back"});
    }).then((r) => r.state && page.show(r.state));
  });
  return page;
})();
"""

# The real terminal: xterm.js fed the session's own bytes.
_XTERM = r"""
(function () {
  const page = window.dshPage;
  const box = document.getElementById("terminal");
  const term = new Terminal({
    cols: 80, rows: 24, scrollback: 5000, cursorBlink: false, disableStdin: true,
    fontSize: 14, fontFamily: "monospace", theme: {background: "#111111"}
  });
  window.dshTerm = term;
  // The harness answers the program's queries itself (cursor position, device
  // attributes, modes...); xterm.js must not answer them again as typed keys.
  const swallow = () => true;
  for (const id of [
    {final: "n"}, {prefix: "?", final: "n"}, {final: "c"}, {prefix: ">", final: "c"},
    {prefix: "=", final: "c"}, {intermediates: "$", final: "p"},
    {prefix: "?", intermediates: "$", final: "p"}, {final: "t"}, {prefix: ">", final: "q"}
  ]) term.parser.registerCsiHandler(id, swallow);
  for (const id of [{intermediates: "$", final: "q"}, {intermediates: "+", final: "q"}])
    term.parser.registerDcsHandler(id, swallow);
  for (const ident of [4, 10, 11, 12, 52])
    term.parser.registerOscHandler(ident, (data) => data.includes("?"));
  term.open(box);
  function bytes(b64) {
    const raw = atob(b64);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  page.onState = (state) => {
    term.options.disableStdin = state !== "person";
    box.classList.toggle("mine", state === "person");
    if (state === "person") term.focus();
  };
  term.onData((data) => page.type(data));
  const events = new EventSource(page.base + "/stream");
  events.addEventListener("reset", (e) => {
    const d = JSON.parse(e.data);
    term.reset();
    term.resize(d.cols, d.rows);
    term.write(bytes(d.data));
    document.getElementById("cut").hidden = !d.cut;
  });
  events.addEventListener("out", (e) => term.write(bytes(JSON.parse(e.data).data)));
  events.addEventListener("size", (e) => {
    const d = JSON.parse(e.data);
    term.resize(d.cols, d.rows);
  });
  events.addEventListener("state", (e) => page.show(JSON.parse(e.data).control));
  events.addEventListener("end", (e) => {
    events.close();
    page.ended(JSON.parse(e.data).reason);
  });
  page.show(document.body.dataset.control || "agent");
})();
"""

# The text view: what the terminal shows, as text.
_SCRIPT = r"""
(function () {
  const page = window.dshPage;
  const base = page.base;
  const term = document.getElementById("terminal");
  let follow = true;
  term.addEventListener("scroll", () => {
    follow = term.scrollTop + term.clientHeight >= term.scrollHeight - 4;
  });
  page.onState = (state) => {
    term.classList.toggle("mine", state === "person");
    if (state === "person") term.focus();
  };
  const events = new EventSource(base + "/events");
  events.addEventListener("screen", (e) => {
    const view = JSON.parse(e.data);
    term.textContent = view.text;
    document.getElementById("status").textContent = view.status;
    if (follow) term.scrollTop = term.scrollHeight;
  });
  events.addEventListener("state", (e) => page.show(JSON.parse(e.data).control));
  events.addEventListener("end", (e) => {
    events.close();
    page.ended(JSON.parse(e.data).reason);
  });
  const type = page.type;
  const named = {
    Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b",
    ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
    Home: "\x1b[H", End: "\x1b[F", Delete: "\x1b[3~", PageUp: "\x1b[5~", PageDown: "\x1b[6~"
  };
  document.addEventListener("keydown", (e) => {
    if (page.control !== "person" || e.metaKey) return;
    if (e.target && e.target.tagName === "BUTTON" && e.key === "Enter") return;
    let text = null;
    if (e.ctrlKey && !e.altKey && e.key.length === 1) {
      const c = e.key.toLowerCase().charCodeAt(0);
      if (c >= 97 && c <= 122) text = String.fromCharCode(c - 96);
      else if (e.key === "[") text = "\x1b";
      else if (e.key === "]") text = "\x1d";
      else if (e.key === "\\") text = "\x1c";
    } else if (named[e.key] !== undefined) {
      text = named[e.key];
    } else if (e.key.length === 1 && !e.ctrlKey) {
      text = (e.altKey ? "\x1b" : "") + e.key;
    }
    if (text !== null) {
      e.preventDefault();
      type(text);
    }
  });
  document.addEventListener("paste", (e) => {
    if (page.control !== "person") return;
    e.preventDefault();
    type((e.clipboardData || window.clipboardData).getData("text").replace(/\r?\n/g, "\r"));
  });
  page.show(document.body.dataset.control || "agent");
})();
"""


def render_page(link: WatchLink, nonce: str, state: str, mode: str = "terminal") -> str:
    """The whole page for ``link``; what the terminal shows arrives over an event stream.

    ``mode`` is ``terminal`` (xterm.js over ``/stream``) or ``text: <why>`` (the text
    view over ``/events``, the reason said on the page).
    """
    sid = html.escape(link.session_id)
    expires = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(link.expires_at))
    if link.control:
        buttons = (
            '<p><button id="take-control" type="button">Take control</button>'
            '<button id="hand-back" type="button" disabled>Hand back</button></p>'
            '<p class="note">While you have control the agent cannot type here; it sees '
            "what you do. Closing this page hands control back.</p>"
        )
    else:
        buttons = '<p class="note">This link is read-only: it shows the terminal.</p>'
    reason = (
        f'<p>The agent asks for help: <strong id="reason">{html.escape(link.reason)}</strong></p>'
        if link.reason
        else ""
    )
    nonce = html.escape(nonce)
    if mode == "terminal":
        assets = f"{WATCH_PREFIX}{link.token}/asset"
        head = f'<link rel="stylesheet" href="{html.escape(assets)}/xterm.css">'
        shown = (
            '<p id="mode" class="note" data-mode="terminal">The terminal as the program draws '
            'it. <span id="cut" hidden>(Older output was cut.)</span></p>'
            '<div id="terminal"></div>'
        )
        scripts = (
            f'<script nonce="{nonce}" src="{html.escape(assets)}/xterm.js"></script>'
            f'<script nonce="{nonce}">{_COMMON}{_XTERM}</script>'
        )
    else:
        why = mode.partition(": ")[2] or "the real terminal is not available"
        head = ""
        shown = (
            f'<p id="mode" class="note" data-mode="text">Shown as text: {html.escape(why)}. '
            "No colours and no cursor here.</p>"
            '<pre id="terminal" tabindex="0"></pre>'
        )
        scripts = f'<script nonce="{nonce}">{_COMMON}{_SCRIPT}</script>'
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="referrer" content="no-referrer">'
        f"<title>Terminal {sid}</title><style>{_STYLE}</style>{head}</head>"
        f"<body data-control={json.dumps(state)}>"
        f"<h1>Terminal session {sid} <small id=status></small></h1>{reason}"
        f'<p id="state" aria-live="polite"></p>{buttons}{shown}'
        f'<p class="note">This link works until {expires} or until the session closes.</p>'
        f"{scripts}</body></html>"
    )
