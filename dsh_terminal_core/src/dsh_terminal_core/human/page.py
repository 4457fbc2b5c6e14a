"""The watch page: the terminal as a person sees it, live, and the control buttons.

Pinned ids (tests and people's scripts rely on them): ``#terminal`` holds the terminal's
text; a control link's page has ``#take-control`` and ``#hand-back``, a read-only
link's page has neither; ``#state`` says who has control. The script follows the
page's own ``/events`` stream and, while the person holds control, sends key presses
to ``/keys`` in order (Enter, Backspace, Tab, Escape, arrows, Home, End, Delete,
Ctrl-letters, printable text, pastes). It carries no token other than the link's own
path, which the page already is.
"""

from __future__ import annotations

import html
import json
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .service import WatchLink

__all__ = ["render_page"]

_STYLE = """
body{font-family:sans-serif;margin:1em;background:#fafafa}
#terminal{background:#111;color:#ddd;font:14px/1.25 monospace;padding:.6em;white-space:pre;
overflow:auto;min-height:20em;max-height:75vh;border:3px solid #111;outline:none}
#terminal.mine{border-color:#c60}
button{font-size:1em;margin:.5em .5em .5em 0}
.note{color:#555}
"""

_SCRIPT = r"""
(function () {
  const base = location.pathname.replace(/\/+$/, "");
  const term = document.getElementById("terminal");
  const stateEl = document.getElementById("state");
  const take = document.getElementById("take-control");
  const back = document.getElementById("hand-back");
  let control = "agent";
  let follow = true;
  term.addEventListener("scroll", () => {
    follow = term.scrollTop + term.clientHeight >= term.scrollHeight - 4;
  });
  const words = {
    agent: "The agent has control. You are watching.",
    taking: "Taking control: waiting for the agent's command to settle…",
    person: "You have control: your keys go to the terminal. Hand back when done.",
    returning: "Handing back…",
    closed: "The session is closed."
  };
  function show(state) {
    control = state;
    stateEl.textContent = words[state] || state;
    document.body.dataset.control = state;
    term.classList.toggle("mine", state === "person");
    if (take) take.disabled = state !== "agent";
    if (back) back.disabled = state !== "person";
    if (state === "person") term.focus();
  }
  const events = new EventSource(base + "/events");
  events.addEventListener("screen", (e) => {
    const view = JSON.parse(e.data);
    term.textContent = view.text;
    document.getElementById("status").textContent = view.status;
    if (follow) term.scrollTop = term.scrollHeight;
  });
  events.addEventListener("state", (e) => show(JSON.parse(e.data).control));
  events.addEventListener("end", (e) => {
    events.close();
    show("closed");
    stateEl.textContent = "This link has " +
      (JSON.parse(e.data).reason === "expired" ? "expired." : "ended: the session closed.");
  });
  function post(what, body) {
    return fetch(base + "/" + what, {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body),
      credentials: "omit",
      referrerPolicy: "no-referrer"
    }).then((r) => r.json().catch(() => ({})));
  }
  if (take) take.addEventListener("click", () => {
    show("taking");
    post("control", {action: "take"}).then((r) => r.state && show(r.state));
  });
  if (back) back.addEventListener("click", () => {
    flush().then(() => {
      show("returning");
      return post("control", {action: "hand_back"});
    }).then((r) => r.state && show(r.state));
  });
  // Keys go out in order: one request at a time, what was typed meanwhile in the next.
  let pending = "";
  let sending = Promise.resolve();
  function flush() {
    sending = sending.then(() => {
      if (!pending) return;
      const data = pending;
      pending = "";
      return post("keys", {data: data});
    });
    return sending;
  }
  function type(text) {
    if (control !== "person" || !text) return;
    pending += text;
    flush();
  }
  const named = {
    Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b",
    ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
    Home: "\x1b[H", End: "\x1b[F", Delete: "\x1b[3~", PageUp: "\x1b[5~", PageDown: "\x1b[6~"
  };
  document.addEventListener("keydown", (e) => {
    if (control !== "person" || e.metaKey) return;
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
    if (control !== "person") return;
    e.preventDefault();
    type((e.clipboardData || window.clipboardData).getData("text").replace(/\r?\n/g, "\r"));
  });
  show(document.body.dataset.control || "agent");
})();
"""


def render_page(link: WatchLink, nonce: str, state: str) -> str:
    """The whole page for ``link``; the terminal's text arrives over the event stream."""
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
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="referrer" content="no-referrer">'
        f"<title>Terminal {sid}</title><style>{_STYLE}</style></head>"
        f"<body data-control={json.dumps(state)}>"
        f"<h1>Terminal session {sid} <small id=status></small></h1>{reason}"
        f'<p id="state" aria-live="polite"></p>{buttons}'
        '<pre id="terminal" tabindex="0"></pre>'
        f'<p class="note">This link works until {expires} or until the session closes.</p>'
        f'<script nonce="{html.escape(nonce)}">{_SCRIPT}</script></body></html>'
    )
