"""The remote prompt protocol: each command's exit code behind a per-session nonce.

After login the session types two lines into the remote shell (bash or a POSIX sh):

1. ``stty sane; stty -echo rows 40 cols 160; set +o emacs +o vi`` — the terminal gets
   ordinary modes (``^C`` interrupts, tabs stay tabs) and a size, since the local client
   relays a pipe, not a terminal, and so sends none; it stops echoing input; and the
   shell stops line editing, so what a command prints is all that comes
   back — then a line that says it is done (the second line is typed only after it: a
   line editor reads ahead, and input it had buffered would be lost when editing is
   switched off);
2. ``PS1`` set to ``<nonce>:${__dsh_s}:$?:`` and a newline, ``PS2`` empty.

Every prompt then ends a line with the nonce, the number of the command it follows and
that command's exit status. The nonce is 128 random bits written into ``PS1`` in two
quoted halves, so not even the echo of the setup line contains it. A command runs as
``[ "$__dsh_s" -lt <n> ] && { __dsh_s=<n>; eval '<command>'; }``: one line of input
whatever the command holds (so exactly one prompt follows it), in the shell itself (so
``cd`` and variables persist), numbered (so a prompt printed for another reason — a
Ctrl-C at an idle prompt — is never taken for this command's) and guarded, so a copy
typed again runs nothing. Prompt lines are removed from the output; whatever a command
printed without a final newline stays, as the prompt line's prefix.
"""

from __future__ import annotations

import re
import secrets

import attrs

__all__ = ["MAX_LINE_BYTES", "RemoteProtocol", "quote"]

# A remote terminal in canonical mode takes at most 4095 bytes per line.
MAX_LINE_BYTES = 4000

SETUP_ECHO = "stty sane 2>/dev/null; stty -echo rows 40 cols 160; set +o emacs +o vi 2>/dev/null"


def quote(text: str) -> str:
    """POSIX single-quote ``text`` so a shell reads it back verbatim."""
    return "'" + text.replace("'", "'\\''") + "'"


@attrs.define
class RemoteProtocol:
    """One session's nonce, its setup lines, and the parsing of its prompt lines."""

    first_half: str = attrs.field(factory=lambda: secrets.token_hex(8))
    second_half: str = attrs.field(factory=lambda: secrets.token_hex(8))

    @property
    def nonce(self) -> str:
        return self.first_half + self.second_half

    def setup_terminal(self) -> tuple[str, re.Pattern[str]]:
        """The first setup line, and the pattern of the line it prints once it ran.

        That line also names the remote user (group ``user``): who the session really
        is, whatever ssh configuration chose it.
        """
        user = '"$(id -un 2>/dev/null || echo "$USER")"'
        return (
            f"{SETUP_ECHO}; echo '{self.first_half}''{self.second_half}' {user}",
            re.compile(rf"{self.nonce} (?P<user>\S*)$"),
        )

    def setup_prompt(self) -> str:
        """The second setup line: the prompt protocol itself."""
        prompt = f"'{self.first_half}''{self.second_half}:${{__dsh_s}}:$?:'"
        second = (
            "unset PROMPT_COMMAND; PS2=''; PS4='+ '; __dsh_s=0; "
            "__dsh_n=$(printf '\\n_'); "
            f'PS1={prompt}"${{__dsh_n%_}}"'
        )
        return second

    @staticmethod
    def is_setup_echo(line: str) -> bool:
        """True for a line that echoes the setup (before the terminal stopped echoing)."""
        return "stty -echo" in line or "__dsh_" in line

    def command_line(self, seq: int, command: str) -> str:
        """The input line that runs ``command`` as number ``seq``, at most once.

        The guard makes a retyped copy harmless: whichever copy the shell reads first
        runs the command, any later one finds the number taken and does nothing.
        """
        return f'[ "$__dsh_s" -lt {seq} ] && {{ __dsh_s={seq}; eval {quote(command)}; }}'

    def prompt_pattern(self, seq: int) -> re.Pattern[str]:
        """Matches the prompt line that follows command ``seq``; group ``rc`` is its status."""
        return re.compile(rf"{self.nonce}:{seq}:(?P<rc>\d+):$")

    def any_prompt(self) -> re.Pattern[str]:
        return re.compile(rf"{self.nonce}:(?P<seq>\d+):(?P<rc>\d+):$")

    def output(self, text: str, seq: int) -> str:
        """The output of command ``seq`` in ``text`` (lines through its prompt line).

        A prompt of another command (``^C`` that reached an idle prompt prints a newline
        and a prompt) was printed before this command's line ran, so it and everything
        before it are dropped. This command's prompt line keeps what precedes the nonce:
        output without a final newline.
        """
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        prompt = self.any_prompt()
        start = 0
        for index, line in enumerate(lines):
            found = prompt.search(line)
            if found is not None and found["seq"] != str(seq):
                start = index + 1
        kept: list[str] = []
        for index in range(start, len(lines)):
            line = lines[index]
            found = prompt.search(line)
            if found is None:
                kept.append(line + "\n")
            elif found.start() > 0:
                last = index == len(lines) - 1
                kept.append(line[: found.start()] + ("" if last else "\n"))
        return "".join(kept)
