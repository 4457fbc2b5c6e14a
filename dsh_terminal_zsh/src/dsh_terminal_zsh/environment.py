"""zsh's part of a session: the prompt protocol through ``ZDOTDIR`` and ``precmd``.

zsh reads no startup file from the environment, so the protocol comes from a
``.zshrc`` in this package's ``zdotdir``: ``ZDOTDIR`` points there, which also keeps
the user's ``~/.zshrc`` out (``--no-globalrcs`` keeps ``/etc/zsh/zshrc`` out;
``/etc/zsh/zshenv`` is read by every zsh and cannot be skipped). A zsh started inside
the session inherits ``ZDOTDIR`` and so the protocol, as a nested bash inherits
``PROMPT_COMMAND``.

The marker is in ``PS1`` inside ``%{ %}`` (zero width for the line editor); ``%?`` is
the last command's status, which zsh keeps across ``precmd``. ``precmd`` re-asserts
``PS1`` before every prompt, so a ``PS1=...`` never survives to the next prompt;
``PROMPT_CR``/``PROMPT_SP`` are off, so zsh prints no ``%`` mark and no carriage return
of its own before a prompt. The EXIT marker is printed by a ``zshexit`` hook.

With ``environment = "login"`` the same ``.zshrc`` replays, last, the functions and
aliases a zsh login shell ended with (``DSH_LOGIN_DEFINITIONS_<n>``, removed once read;
:mod:`dsh_terminal_bash.login`).
"""

from __future__ import annotations

import os

from dsh_terminal_bash import PROMPT, LoginReplay, ShellPolicy

__all__ = ["PS1", "PS2", "ZDOTDIR", "ZSH"]

ZDOTDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zdotdir")

PS1 = "%{\x1b]133;D;%?\x07%}" + PROMPT.replace("%", "%%")
PS2 = "> "

ZSH = ShellPolicy(
    section="terminal-zsh",
    environment={"ZDOTDIR": ZDOTDIR, "DSH_ZSH_PS1": PS1, "DSH_ZSH_PS2": PS2},
    continuation_prompts=(PS2,),
    login_replay=LoginReplay(dialect="zsh", reads=os.path.join(ZDOTDIR, ".zshrc")),
)
"""zsh's policy: its protocol is the ``.zshrc`` in :data:`ZDOTDIR`, its ``PS2`` is ``> ``,
and its line editor draws nothing before a prompt once ``PROMPT_SP`` is off; a zsh login
shell's functions and aliases are replayed by the same ``.zshrc``."""
