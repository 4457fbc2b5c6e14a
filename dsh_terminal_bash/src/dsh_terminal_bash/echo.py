"""The echo of a send's line: whether the terminal echoed it, and dropping it from a result.

A result that repeats the command the model just typed wastes its tokens, so the echo
is dropped — but only where it is one (SPEC §27.1). Output that merely equals the typed
line (``stty -echo; cat``, ``read -s pw; echo "$pw"``) is the program's own and must
never go.
"""

from __future__ import annotations

from .environment import PROMPT

__all__ = ["echoed_by", "without_echo"]

# How much output may precede the echo of a send's line: a shell's answer to an
# interrupt of the previous command (a status line, blank lines, its prompt).
_ANSWER_BOUND = 512


def echoed_by(modes: tuple[bool, bool] | None) -> bool:
    """Whether input written under these (ECHO, ICANON) modes comes back as echo.

    With ECHO set the terminal echoes it; with ECHO clear and ICANON clear the reader
    runs its own line editor and echoes (bash's and python's readline). ECHO clear in
    canonical mode is input nobody echoes (``stty -echo; cat``, ``read -s``): what comes
    back is the program's own output. Modes that could not be read count as no echo,
    for the same reason.
    """
    return modes is not None and (modes[0] or not modes[1])


def without_echo(text: str, line: str, submit: bool, cols: int) -> str:
    """``text`` without the echo of ``line``, when that echo is exactly identifiable.

    Call it only when the terminal echoed the input (:func:`echoed_by`).
    """
    if not submit or not line or "\n" in line or "\r" in line:
        return text
    if len(PROMPT) + len(line) >= cols - 1:
        return text  # readline echoes long lines in horizontal-scroll form
    echoed = line + "\n"
    # The shell echoes the line behind the prompt that read it, before running it, so
    # whatever precedes that echo came before this command ran: the shell answering
    # an interrupt of the previous one ("Terminated", a blank line, that prompt) and
    # the terminal's own echo of the line typed ahead of it.
    prompted = PROMPT + echoed
    if text.startswith(prompted):
        return text[len(prompted) :]
    # Only near the start: what comes before is a few short lines, and the command's
    # own output further down may quote its prompt and line.
    at = text.find("\n" + prompted, 0, _ANSWER_BOUND + len(prompted))
    if at >= 0:
        return text[at + 1 + len(prompted) :]
    return text[len(echoed) :] if text.startswith(echoed) else text
