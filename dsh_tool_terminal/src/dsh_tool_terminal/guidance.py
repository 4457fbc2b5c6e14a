"""The system-prompt section that tells a model how to use persistent terminals."""

from __future__ import annotations

__all__ = ["GUIDANCE", "GUIDANCE_ORDER"]

GUIDANCE_ORDER = 106

GUIDANCE = """\
## Persistent terminals

- Open a terminal (terminal_open) only when you need state that outlives one command — a
  working directory, exported variables, an activated virtualenv, job control — or a
  program that reads interactive input (a REPL, a debugger, a password prompt). For a
  one-shot command, prefer a one-shot tool.
- Keep track of the session ids you open and close them (terminal_close) once they no
  longer matter; each agent has a limited number of sessions.
- terminal_send returns when the terminal is waiting for input again. waitReason says
  how that was decided: "stdin_read" means the shell prompt (or the program in the
  foreground) is waiting to read input; "inferred_idle" only means no output arrived for
  a while and "timeout" that the time limit passed — neither proves the command
  finished. Check with terminal_read, send more input, or interrupt with
  terminal_signal (SIGINT).
- inputHidden=true means the program is reading input with echo off, typically a
  password prompt.
- Long-running commands can run with run_in_background=true; collect their output with
  job_output and stop them with job_kill.
- Older output is in the scrollback: page through it with terminal_read.
"""
