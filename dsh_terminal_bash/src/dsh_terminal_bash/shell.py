"""What one shell program brings to a session: the shell-neutral base's one variable part.

Everything a session does — the prompt protocol's marker and prompt text, the readiness
ladder and its fences, cancels, secrets, screens, records — is the same for every shell
this package drives, because it rests on facts about the terminal and the shell's process
(is it blocked reading, has it consumed the input), never on the shell's language. What
differs is small and is a :class:`ShellPolicy`: how the shell is told, without reading the
user's rc files, to print the private marker ``ESC ] 133;D;<status> BEL`` followed by
:data:`~.environment.PROMPT` at every prompt and to re-assert that prompt when a command
replaces it; the continuation prompts it shows behind a second line of input; and, for a
shell whose line editor draws something of its own before each prompt, a filter that
takes that drawing out of the text before it is read.

With ``environment = "login"`` (SPEC §32.1) a policy's :class:`LoginReplay` says how the
shell's sessions take the functions and aliases a login shell *of the same program*
ended with (the variables every shell takes alike, through the environment).

The bash backend (``BASH``) is one policy; ``dsh_terminal_zsh`` and ``dsh_terminal_fish``
hold the others and build their backends from :class:`~.backend.ShellBackend`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from dsh_terminal_core.provider import QuietHelpers

__all__ = ["LoginReplay", "OutputFilter", "ShellPolicy"]

OutputFilter = Callable[[bytes], bytes]
"""Takes one piece of terminal output, returns what the sanitizer reads of it. Stateful
(one per session), so a pattern split across pieces is recognised whole."""


def _same_args(shell_args: Sequence[str]) -> list[str]:
    return list(shell_args)


@attrs.frozen(kw_only=True)
class LoginReplay:
    """How a shell's sessions replay the login shell's functions and aliases.

    ``dialect``: the capture dialect (:data:`dsh_terminal_core.sandbox.login.LOGIN_DIALECTS`)
    whose definitions this shell reads; a login shell of another program gives variables
    only. The definitions reach the session in ``DSH_LOGIN_DEFINITIONS_<n>`` variables,
    which the shell's own start-up code reads, replays and removes. ``reads``: the file
    holding that code when it is a file (a confined shell must see it: it may not lie
    under the host's ``/tmp``), None when it rides on the command line. ``args``: the
    configured ``shell_args`` as the shell needs them to run that code.
    """

    dialect: str
    reads: str | None = None
    args: Callable[[Sequence[str]], list[str]] = _same_args


@attrs.frozen(kw_only=True)
class ShellPolicy:
    """One shell program's part of a session; the rest is shared.

    ``section``: the plugin's config section (for messages that name a setting).
    ``environment``: variables that install the prompt protocol, applied over the
    session's common environment. ``protocol_args``: arguments that come after the
    configured ``shell_args`` (a shell taking its protocol on the command line);
    ``continuation_prompts``: what the shell prints before the second and later lines
    of a multi-line send (a ``waitFor`` never matches them); ``output_filter``: makes the
    session's :data:`OutputFilter`, None for a shell that needs none; ``login_replay``:
    how its sessions take a login shell's functions and aliases (None: variables only).
    ``quiet_helpers``: for a shell that runs helper threads at its prompt, the waits in
    which they are known, from the shell's source, to end without output (see
    :class:`~dsh_terminal_core.provider.QuietHelpers`); without it a threaded shell is
    proof of a read only once its helpers have gone. ``holds_interrupt_in_read``: the
    shell's line editor, blocked in a plain ``read`` of the terminal (its ``poll`` said a
    byte was there, and a cancel flushed it), takes a SIGINT only with the next byte,
    which it then treats as input: a held SIGINT followed by the empty line that answers
    it would run the part of a line the cancel cut (fish).
    """

    section: str
    environment: Mapping[str, str]
    protocol_args: tuple[str, ...] = ()
    continuation_prompts: tuple[str, ...] = ()
    output_filter: Callable[[int], OutputFilter] | None = None
    """Called with the terminal's column count; ``resize`` makes a new one."""
    login_replay: LoginReplay | None = None
    quiet_helpers: QuietHelpers | None = None
    holds_interrupt_in_read: bool = False
