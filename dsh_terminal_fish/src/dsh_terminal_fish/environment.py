"""fish's part of a session: the prompt protocol through ``-C`` and a ``fish_prompt`` event.

fish takes the protocol on its command line (``--no-config`` keeps every config file
out, the user's and the system's; ``-C`` runs :data:`INIT` before the first prompt), so
no file is needed, confined or not.

fish draws its prompt once per prompt and *repaints* that same text, with the command
line behind it, as input arrives: a marker inside ``fish_prompt`` would come back with
every repaint. So the marker is printed by a handler of the ``fish_prompt`` event, which
fish fires once before each new prompt, with ``$status`` still the last command's. The
handler also re-asserts ``fish_prompt`` (and empties the right and mode prompts), so a
``function fish_prompt ...`` of a command never survives to the next prompt; the prompt
function re-installs the handlers if a command erased them. The EXIT marker is printed
by a ``fish_exit`` handler. Commands a user function could shadow (``printf``,
``functions``, ``commandline``, ``source``, ``math``) are called through ``builtin``;
``set``, ``test``, ``string`` and ``status`` cannot be shadowed.

A Ctrl-C brings no new prompt event in fish: at an empty command line fish does nothing,
and a partial one is cleared and redrawn. So a ``SIGINT`` handler prints the marker and
the prompt for an empty line, and a ``fish_cancel`` handler the marker before fish redraws
a partial one; the marker says 130 (bash's ``$?`` after a Ctrl-C) until the next command
runs (``fish_preexec``). fish's own ``$status`` is left as it was. fish does not cancel
a running line on a SIGINT a handler observes, so while a line runs (from
``fish_preexec`` to the next prompt) the handler disarms itself and raises SIGINT again,
which fish then takes as a Ctrl-C (a loop of builtins stops; its prompt says 130); the
next prompt re-arms it.

With ``environment = "login"`` the functions (aliases among them) a fish login shell
ended with ride in ``DSH_LOGIN_DEFINITIONS_<n>`` variables (:mod:`dsh_terminal_bash.login`);
:data:`LOGIN_REPLAY`, run by ``-C`` after the protocol, sources them and erases the
variables, so nothing the session runs inherits them.

History is kept in memory only (``fish_history`` empty); the greeting and
autosuggestions are off.

A nested ``fish`` does not inherit ``-C``: the protocol's ``fish`` function passes it on
(``command fish -C ...``, for an interactive fish only), after the user's config, so a
nested fish settles on its prompt with exit codes. A fish started otherwise (``exec
fish``, ``sudo fish``) reads the user's config and draws its own prompt: it settles
through the exact stdin-wait tier, without an exit code.
"""

from __future__ import annotations

from dsh_terminal_bash import PROMPT, LoginReplay, ShellPolicy
from dsh_terminal_core.provider import QuietHelpers

from .abandon import AbandonedLines

__all__ = ["FISH", "HELPERS", "INIT", "LOGIN_REPLAY"]

INIT = (
    "set -g fish_greeting ''\n"
    "set -g fish_history ''\n"
    "set -g fish_autosuggestion_enabled 0\n"
    "function __dsh_prompt\n"
    "    set -e __dsh_running\n"
    "    builtin functions -q __dsh_on_prompt __dsh_int\n"
    "    or builtin printf '%s\\n' $__dsh_init | builtin source\n"
    f"    builtin printf '%s' '{PROMPT}'\n"
    "end\n"
    "function __dsh_on_prompt --on-event fish_prompt\n"
    "    set -l code $status\n"
    "    set -e __dsh_running\n"
    "    builtin functions -q __dsh_int; or __dsh_arm\n"
    "    set -q __dsh_int[1]; and set code 130\n"
    "    builtin printf '\\e]133;D;%s\\a' $code\n"
    "    builtin functions -e fish_prompt fish_right_prompt fish_mode_prompt\n"
    "    builtin functions -c __dsh_prompt fish_prompt\n"
    "end\n"
    "function __dsh_arm\n"
    "    function __dsh_int --on-signal SIGINT\n"
    "        set -g __dsh_int 1\n"
    "        if set -q __dsh_running[1]\n"
    "            builtin functions -e __dsh_int\n"
    "            command kill -INT $fish_pid\n"
    "        else\n"
    "            test -z (builtin commandline)\n"
    f"            and builtin printf '\\e]133;D;130\\a%s' '{PROMPT}'\n"
    "        end\n"
    "    end\n"
    "end\n"
    "__dsh_arm\n"
    "function __dsh_cancel --on-event fish_cancel\n"
    "    builtin printf '\\e]133;D;130\\a'\n"
    "end\n"
    "function __dsh_run --on-event fish_preexec\n"
    "    set -e __dsh_int\n"
    "    set -g __dsh_running 1\n"
    "end\n"
    "function __dsh_exit --on-event fish_exit\n"
    "    builtin printf '\\e]133;E;%s\\a' $status\n"
    "end\n"
    "function fish --description 'fish with the prompt protocol of this session'\n"
    "    set -l init 'status is-interactive; and begin; set -g __dsh_init '(string escape -- $__dsh_init)\n"
    "    set -a init '; builtin printf \\'%s\\\\n\\' $__dsh_init | builtin source; end'\n"
    "    command fish -C (string join '' -- $init) $argv\n"
    "end\n"
)
"""Run by ``-C`` before the first prompt; kept in ``__dsh_init`` for the prompt to heal."""


LOGIN_REPLAY = (
    "if set -q DSH_LOGIN_DEFINITIONS_0\n"
    "    set -l __dsh_definitions\n"
    "    set -l __dsh_n 0\n"
    "    while set -q DSH_LOGIN_DEFINITIONS_$__dsh_n\n"
    "        set -l __dsh_name DSH_LOGIN_DEFINITIONS_$__dsh_n\n"
    "        set -a __dsh_definitions $$__dsh_name\n"
    "        set -e $__dsh_name\n"
    "        set __dsh_n (builtin math $__dsh_n + 1)\n"
    "    end\n"
    "    string join '' -- $__dsh_definitions | builtin source\n"
    "end\n"
)
"""Run by ``-C`` after :data:`INIT`; does nothing unless the session carries definitions."""


HELPERS = QuietHelpers(futex_ns=500_000_000, own_poll_ns=256_000_000, shared_fifos=True)
"""The waits fish's helper threads linger in after a line, known to end without output.

fish highlights the command line (and runs other background work) on a thread pool.
A worker that finds the queue empty waits on the pool's condition variable for at most
half a second (``IO_WAIT_FOR_WORK_DURATION_MS``, a ``futex`` sleep with a timeout), then,
the queue still empty, leaves the pool and exits; work queued meanwhile wakes it first
(so it runs, which the look's run stamps see). Its results go to the main thread through
a self-pipe the main thread polls beside the terminal, which the look checks is empty.
fish's descriptor monitor (command substitutions' output) with nothing left to watch
polls only its own wake-up descriptor for 256 ms (its "wait lap") and then exits.
Neither writes to the terminal: only the main thread draws. Without this declaration a
fish send settles only once those threads are gone, about half a second after it.

Every fish of the user opens the same named pipe, by its path, to hear of changes to
universal variables (``shared_fifos``): a nested fish holds the one the fish that
started it holds, which without the declaration made it look as if it waited on its
parent.
"""


def _quoted(text: str) -> str:
    """``text`` as one fish single-quoted word (only ``\\`` and ``'`` are escaped there)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


FISH = ShellPolicy(
    section="terminal-fish",
    environment={},
    protocol_args=("-C", f"set -g __dsh_init {_quoted(INIT)}\n{INIT}{LOGIN_REPLAY}"),
    continuation_prompts=(),
    output_filter=AbandonedLines,
    login_replay=LoginReplay(dialect="fish"),
    quiet_helpers=HELPERS,
    holds_interrupt_in_read=True,
)
