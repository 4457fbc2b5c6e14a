"""The system-prompt section that tells a model how to use persistent terminals.

It names only tools this harness offers: the background bullet appears only when
``run_in_background`` is enabled and a jobs service provides ``job_output``/``job_kill``
(the MCP server sends this text as its instructions, so it must match the tool list).
"""

from __future__ import annotations

__all__ = ["GUIDANCE", "GUIDANCE_ORDER", "guidance"]

GUIDANCE_ORDER = 106

_HEAD = """\
## Persistent terminals

- Open a terminal (terminal_open) when you need state that outlives one command — a
  working directory, exported variables, an activated virtualenv, job control — or a
  program that reads interactive input (a REPL, a debugger, a password prompt). Reuse an
  open session for further commands instead of opening one per command.
- Keep track of the session ids you open and close them (terminal_close) once they no
  longer matter; each agent has a limited number of sessions.
- terminal_send returns when the terminal is waiting for input again. waitReason says
  how that was decided: "stdin_read" means the shell prompt (or the program in the
  foreground) is waiting to read input; "inferred_idle" only means no output arrived for
  a while and "timeout" that the time limit passed — neither proves the command
  finished. Check with terminal_read, send more input, or interrupt with
  terminal_signal (SIGINT). "inferred_idle" with periodic=true means the program
  redraws on a clock and never reads keys (watch, tail -f): it will not stop by itself.
- inputHidden=true means the program is reading input with echo off, typically a
  password prompt.
- To start a server or a watcher, send it with waitFor, a regular expression for the
  line that says it is ready (e.g. waitFor "Listening on"): the call returns
  waitReason "matched" with that line as soon as it is printed, instead of you sleeping
  and polling terminal_read. The program keeps running.
"""

_BACKGROUND = """\
- Long-running commands can run with run_in_background=true; collect their output with
  job_output and stop them with job_kill.
"""

_TAIL = """\
- Long output shows its first and its last lines; one line in between says which lines
  were omitted. Read them, or any earlier output, with terminal_read: lines are numbered
  from 1 and every result shows the range it holds (e.g. "lines 101-105 of 1018").
- To find something in long output, search it with terminal_search instead of paging
  it: search a long build's output for "error" (context=2 shows the lines around each
  match), then read around a match with terminal_read at its line number.
"""


def guidance(background: bool = True) -> str:
    """The section's text; ``background`` says whether background sends are offered."""
    return _HEAD + (_BACKGROUND if background else "") + _TAIL


GUIDANCE = guidance()
