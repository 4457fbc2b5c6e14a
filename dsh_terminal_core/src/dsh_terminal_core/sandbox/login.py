"""The user's login environment, captured once under an owner's sandbox (SPEC §32.1).

A shell backend starts its shell without the user's rc files (``bash --noprofile
--norc``): the controlled prompt must not meet a user's prompt framework. So what those
files set up — ``PATH`` additions, nvm's node, pyenv's python, a conda base, aliases —
is missing unless the harness itself inherited it, and an MCP server started by a
desktop client inherits a bare environment. With ``environment = "login"`` a backend
asks this module instead: the user's login shell runs **once**, on a terminal of its
own (an rc file may test for one), under the sandbox of the owner whose open asked
first, with a time limit, and reports what it ends with through files in a directory
it may write (the owner's private ``/tmp`` when confined). Its output is discarded; any
output at all, a non-zero exit, no report or the time limit make the capture *fail*:
sessions then start clean and the problem is reported once (:class:`LoginCapture`).

Shell-neutral: what differs between shells is a :class:`LoginDialect` — how to run the
shell as a login shell and the command, in its own language, that writes the report.
Every shell reports its exported variables (``env -0`` runs from any of them); a shell
with a dialect of its own also reports its functions and aliases as text the same shell
replays, which a backend of that shell applies (a bash backend through its rc file). Add
a shell's dialect to :data:`LOGIN_DIALECTS`.

The variables are filtered as the host environment is (:mod:`..provider.env`):
secret-shaped names and ``DSH_*`` are dropped, and so are the ones that describe the
capture's own process (``PWD``, ``SHLVL``, ``_``...).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import pwd
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from ..kernel.agents import Agent
from ..kernel.cancel import Cancellation
from ..kernel.errors import DshError, SandboxUnavailable, owner_not_live
from ..provider.env import is_scrubbed_name
from ..provider.types import TerminalProvider, TerminalSpawnSpec
from .policy import Policy

__all__ = [
    "LOGIN_DIALECTS",
    "LoginCapture",
    "LoginDialect",
    "LoginEnvironment",
    "LoginEnvironmentSource",
    "LoginRequest",
    "capture_login_environment",
    "capture_under_policy",
    "login_dialect",
    "report_dir",
    "user_login_shell",
]

log = logging.getLogger(__name__)

# What describes the capturing process itself, never the user's environment.
_PROCESS_VARIABLES = frozenset(
    {"_", "PWD", "OLDPWD", "SHLVL", "TERM", "COLUMNS", "LINES", "HISTFILE"}
)
# How much of what a failing login shell printed is kept for ``dsh-terminal env``.
_KEPT_OUTPUT = 4096


@attrs.frozen(kw_only=True)
class LoginDialect:
    """How one shell is run as a login shell and asked for what it ends with.

    ``argv(shell, command)`` runs ``command`` after the shell's login files. ``command``
    (``report(directory)``) is written in the shell's own language and writes into
    ``directory``: ``env`` (the exported variables, as ``env -0`` prints them) and, for a
    shell that has them, ``definitions`` (text the same shell replays to define its
    functions and aliases), ``functions`` and ``aliases`` (their names, one a line).
    """

    name: str
    argv: Callable[[str, str], list[str]]
    report: Callable[[str], str]


def _env_report(directory: str) -> str:
    """``env -0`` into ``directory/env``: the same words in every shell language."""
    env = shutil.which("env", path="/usr/bin:/bin") or "/usr/bin/env"
    return f"{shlex.quote(env)} -0 > {shlex.quote(os.path.join(directory, 'env'))}"


def _login_argv(shell: str, command: str) -> list[str]:
    return [shell, "-l", "-i", "-c", command]


def _bash_report(directory: str) -> str:
    """Functions (without bash-completion's), then aliases, then the variables.

    Functions first: a function's body was stored with the aliases of its time already
    expanded, and replaying aliases first would expand them again. Every word is a
    builtin reached past the user's own aliases and functions (``\\builtin``), and the
    rc file's ``set -e``/``-u``/``-x`` are switched off so they cannot cut the report
    short or print it. Completion functions are left out: a session has no use for them
    and bash-completion defines hundreds.
    """
    path = {
        name: shlex.quote(os.path.join(directory, name))
        for name in ("definitions", "functions", "aliases")
    }
    return (
        "\\builtin set +eux; \\builtin shopt -s extdebug; "
        f": > {path['definitions']}; : > {path['functions']}; "
        "for __dsh_f in $(\\builtin compgen -A function); do "
        '\\builtin set -- $(\\builtin declare -F "$__dsh_f"); '
        'case "$3" in */bash-completion/*|*/bash_completion*) continue;; esac; '
        f"\\builtin printf '%s\\n' \"$__dsh_f\" >> {path['functions']}; "
        f'\\builtin declare -f "$__dsh_f" >> {path["definitions"]}; '
        "done; \\builtin shopt -u extdebug; "
        f"\\builtin alias -p >> {path['definitions']}; "
        f"\\builtin compgen -a > {path['aliases']}; "
        f"{_env_report(directory)}"
    )


# zsh's hook functions and its completion system's: a session has its own hooks (a
# ``precmd`` that prints would break the prompt protocol) and no completion system.
_ZSH_SKIPPED = (
    "_*|TRAP*|precmd|preexec|chpwd|periodic|zshexit|zshaddhistory|zsh_directory_name"
    "|compinit|compdef|compdump|compaudit|bashcompinit"
)


def _zsh_report(directory: str) -> str:
    """Functions (not yet loaded autoload stubs, hooks and completion's left out), then
    aliases of every kind as ``alias -L`` prints them, then the variables.

    Functions first, as for bash. The report runs under zsh's own options (``emulate
    -R zsh``): an rc file's ``KSH_ARRAYS``, ``SH_WORD_SPLIT``, ``ERR_EXIT`` or
    ``XTRACE`` would otherwise change what it reads or cut it short. Every word is a
    builtin reached past the user's aliases.
    """
    path = {
        name: shlex.quote(os.path.join(directory, name))
        for name in ("definitions", "functions", "aliases")
    }
    return (
        "\\builtin emulate -R zsh; "
        f": > {path['definitions']}; : > {path['functions']}; "
        "for __dsh_f in ${(k)functions}; do "
        f"case $__dsh_f in ({_ZSH_SKIPPED}) continue;; esac; "
        '[[ $functions[$__dsh_f] == *"builtin autoload -X"* ]] && continue; '
        f"\\builtin print -r -- $__dsh_f >> {path['functions']}; "
        f"\\builtin functions -- $__dsh_f >> {path['definitions']}; "
        "done; "
        f"\\builtin alias -L >> {path['definitions']}; "
        "\\builtin print -rl -- ${(k)aliases} ${(k)galiases} ${(k)saliases} "
        f"> {path['aliases']}; "
        f"{_env_report(directory)}"
    )


def _fish_report(directory: str) -> str:
    """The user's functions (fish's own, vendors', ``fish_*`` and ``__*`` helpers and
    event handlers left out: a session has its own prompt and events), aliases among
    them (fish's ``alias`` defines a function), then the variables. Every word but
    ``alias`` (fish's own function) is a builtin reached past the user's functions."""
    path = {
        name: shlex.quote(os.path.join(directory, name))
        for name in ("definitions", "functions", "aliases")
    }
    return (
        f"builtin printf '' > {path['definitions']}; builtin printf '' > {path['functions']}; "
        "for __dsh_f in (builtin functions -n); "
        "builtin string match -q -r -- '^(__|fish_)' $__dsh_f; and continue; "
        "set -l __dsh_file (builtin functions --details -- $__dsh_f); "
        "builtin test \"$__dsh_file\" = n/a; and continue; "
        "builtin string match -q -- \"$__fish_data_dir/*\" $__dsh_file; and continue; "
        "builtin string match -q -- \"$__fish_sysconf_dir/*\" $__dsh_file; and continue; "
        "builtin string match -q -- '*/vendor_functions.d/*' $__dsh_file; and continue; "
        "builtin functions --handlers "
        "| builtin string match -q -r -- \" $__dsh_f\\$\"; and continue; "
        f"builtin printf '%s\\n' $__dsh_f >> {path['functions']}; "
        f"builtin functions -- $__dsh_f >> {path['definitions']}; "
        "end; "
        "alias | builtin string replace -r -- '^alias (?:-- )?(\\S+) .*' '$1' "
        f"> {path['aliases']}; "
        f"{_env_report(directory)}"
    )


LOGIN_DIALECTS: dict[str, LoginDialect] = {
    "bash": LoginDialect(name="bash", argv=_login_argv, report=_bash_report),
    "zsh": LoginDialect(name="zsh", argv=_login_argv, report=_zsh_report),
    "fish": LoginDialect(name="fish", argv=_login_argv, report=_fish_report),
}
"""Dialects by the shell's program name; any other shell reports its variables only."""


def login_dialect(shell: str) -> LoginDialect:
    """The dialect of the shell at ``shell`` (by its program name), or a variables-only
    one that runs it as ``shell -l -i -c 'env -0 > ...'``."""
    name = os.path.basename(shell)
    known = LOGIN_DIALECTS.get(name)
    if known is not None:
        return known
    return LoginDialect(name=name, argv=_login_argv, report=_env_report)


def user_login_shell(environ: Mapping[str, str] | None = None) -> str | None:
    """The user's login shell: ``$SHELL`` when it names a program, else the password
    database's entry; ``None`` when neither does."""
    environ = os.environ if environ is None else environ
    candidates = [environ.get("SHELL", "")]
    with contextlib.suppress(KeyError):
        candidates.append(pwd.getpwuid(os.getuid()).pw_shell)
    for shell in candidates:
        if os.path.isabs(shell) and os.access(shell, os.X_OK):
            return shell
    return None


@attrs.frozen(kw_only=True)
class LoginEnvironment:
    """What a login shell ended with, filtered; or why it could not be had.

    ``problem`` is ``None`` when the capture worked; otherwise it says what went wrong
    (in words that never quote the shell's output, which may hold anything) and
    ``variables``, ``definitions``, ``functions`` and ``aliases`` are empty: sessions
    start clean. ``removed`` names the secret-shaped variables dropped; ``output`` is
    what a failing shell printed (bounded), for the operator's ``dsh-terminal env``.
    """

    shell: str
    dialect: str
    argv: tuple[str, ...]
    sandbox: str
    variables: Mapping[str, str] = attrs.field(factory=dict)
    removed: tuple[str, ...] = ()
    definitions: str = ""
    functions: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    problem: str | None = None
    output: str = ""
    elapsed_s: float = 0.0

    @property
    def usable(self) -> bool:
        return self.problem is None

    def notice(self) -> str:
        """One line for the person or model who meets a session started clean."""
        return (
            f"[dsh: the login environment was not applied: {self.problem}. This and later "
            "sessions start with a clean environment; `dsh-terminal env` shows the details]"
        )


@attrs.frozen(kw_only=True)
class LoginRequest:
    """One capture: the shell, how to confine it, and a directory it may write.

    ``confine`` turns an argv into the sandboxed argv; ``report_dir`` is
    ``(host path, path inside the sandbox)`` of a directory the confined shell may write
    (:func:`report_dir`); the capture makes a private directory in it and removes it.
    """

    shell: str
    confine: Callable[[list[str]], list[str]]
    report_dir: tuple[str, str]
    sandbox: str
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    timeout_s: float = 10.0


async def capture_login_environment(
    provider: TerminalProvider, request: LoginRequest
) -> LoginEnvironment:
    """Run the login shell once as ``request`` says and return what it ended with.

    Never raises but for the caller's cancellation (the shell is torn down first): a
    shell that cannot start, exits non-zero, prints, reports nothing or outlives
    ``timeout_s`` gives a :class:`LoginEnvironment` with its ``problem``.
    """
    dialect = login_dialect(request.shell)
    host_dir, inner_dir = request.report_dir
    name = f".dsh-login-{secrets.token_hex(8)}"
    host, inner = os.path.join(host_dir, name), os.path.join(inner_dir, name)
    argv = dialect.argv(request.shell, dialect.report(inner))
    shown = tuple(argv[:-1])
    started = time.monotonic()

    def failed(problem: str, output: bytes = b"") -> LoginEnvironment:
        return LoginEnvironment(
            shell=request.shell,
            dialect=dialect.name,
            argv=shown,
            sandbox=request.sandbox,
            problem=problem,
            output=output[:_KEPT_OUTPUT].decode("utf-8", "replace"),
            elapsed_s=time.monotonic() - started,
        )

    try:
        confined = request.confine(argv)  # makes the owner's private /tmp if needed
    except DshError as exc:
        return failed(f"its sandbox could not be set up ({exc.message})")
    except OSError as exc:
        return failed(f"its sandbox could not be set up ({exc.strerror or exc})")
    try:
        os.mkdir(host, 0o700)
    except OSError as exc:
        return failed(f"no directory to report into ({exc.strerror or exc})")
    try:
        spec = TerminalSpawnSpec(argv=confined, cwd=request.cwd, env=dict(request.env))
        try:
            process = await provider.spawn_terminal(spec)
        except DshError as exc:
            return failed(f"{request.shell} could not be started ({exc.message})")
        output = bytearray()
        process.set_output_handler(output.extend)
        try:
            try:
                status = await asyncio.wait_for(asyncio.shield(process.done), request.timeout_s)
            except TimeoutError:
                return failed(
                    f"{_login_words(shown)} did not finish within {request.timeout_s:g} s (an "
                    "rc file that waits for input or starts an interactive program?)",
                    bytes(output),
                )
            process.drain_output()
        finally:
            await asyncio.shield(process.terminate())
        problem = _problem(shown, status.exit_code, status.signal, bytes(output))
        if problem is not None:
            return failed(problem, bytes(output))
        try:
            reported = _read_report(host)
        except OSError:
            return failed(
                f"{_login_words(shown)} ended without reporting its environment (an rc "
                "file that ends the shell or replaces it with another program?)"
            )
        variables, removed = _filtered(reported["env"])
        return LoginEnvironment(
            shell=request.shell,
            dialect=dialect.name,
            argv=shown,
            sandbox=request.sandbox,
            variables=variables,
            removed=removed,
            definitions=reported.get("definitions", ""),
            functions=tuple(reported.get("functions", "").split()),
            aliases=tuple(reported.get("aliases", "").split()),
            elapsed_s=time.monotonic() - started,
        )
    finally:
        shutil.rmtree(host, ignore_errors=True)


class _Confines(Protocol):
    def confine(self, argv: Sequence[str], policy: Policy) -> list[str]: ...


async def capture_under_policy(
    provider: TerminalProvider,
    policy: Policy | None,
    sandbox: _Confines | None,
    *,
    shell: str,
    env: Mapping[str, str],
    timeout_s: float,
) -> LoginEnvironment:
    """Capture with ``shell`` as an owner's sessions run: under ``policy`` (confined by
    ``sandbox``; ``None`` runs it unconfined), in its workspace. What a shell backend
    calls from the capture it hands :class:`LoginCapture`."""
    confined = policy is not None and policy.confined
    where = report_dir(policy.tmp_dir if policy is not None else None, confined)
    mode = str(policy.mode) if policy is not None else "none"
    if where is None:
        return LoginEnvironment(
            shell=shell,
            dialect="",
            argv=(shell,),
            sandbox=mode,
            problem="its owner's sandbox has no private /tmp to report through",
        )

    def confine(argv: list[str]) -> list[str]:
        if not confined:
            return argv
        if sandbox is None:
            raise SandboxUnavailable("no loaded plugin provides 'sandbox'")
        assert policy is not None
        return list(sandbox.confine(argv, policy))

    request = LoginRequest(
        shell=shell,
        confine=confine,
        report_dir=where,
        sandbox=mode,
        env=env,
        cwd=policy.workspace_root if policy is not None else os.getcwd(),
        timeout_s=timeout_s,
    )
    return await capture_login_environment(provider, request)


def _login_words(argv: Sequence[str]) -> str:
    return f"the login shell ({' '.join(argv)} ...)"


def _problem(
    argv: Sequence[str], exit_code: int | None, signal: str | None, output: bytes
) -> str | None:
    words = []
    if signal is not None:
        words.append(f"{_login_words(argv)} was killed by {signal}")
    elif exit_code:
        words.append(f"{_login_words(argv)} exited with status {exit_code}")
    if output:
        lines = output.count(b"\n") + (not output.endswith(b"\n"))
        printed = (
            f"printed {lines} line{'s' if lines != 1 else ''} ({len(output)} bytes) on its terminal"
        )
        words.append(printed if words else f"{_login_words(argv)} {printed}")
    return " and ".join(words) or None


def _read_report(directory: str) -> dict[str, str]:
    """The report's files as text; ``env`` split later. Raises if ``env`` is missing."""
    found = {}
    for name in ("env", "definitions", "functions", "aliases"):
        path = os.path.join(directory, name)
        if name != "env" and not os.path.exists(path):
            continue
        with open(path, "rb") as handle:
            found[name] = os.fsdecode(handle.read())
    return found


def _filtered(env_text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    variables: dict[str, str] = {}
    removed: list[str] = []
    for item in env_text.split("\0"):
        name, sep, value = item.partition("=")
        if not sep or not name or name in _PROCESS_VARIABLES:
            continue
        if is_scrubbed_name(name):
            if not name.startswith("DSH_"):
                removed.append(name)
            continue
        variables[name] = value
    return variables, tuple(sorted(removed))


def report_dir(tmp_dir: str | None, confined: bool) -> tuple[str, str] | None:
    """Where a capture may make its report directory: the owner's private ``/tmp`` as
    the sandbox binds it, or the host's temporary directory for an unconfined shell;
    ``None`` for a confined shell with no private ``/tmp`` (its ``/tmp`` is its own)."""
    if confined:
        return None if tmp_dir is None else (tmp_dir, "/tmp")
    path = tempfile.gettempdir()
    return path, path


class LoginCapture:
    """One capture per backend (so once per harness), shared by every open; its failure
    reported once.

    The first open that needs the environment starts the capture under its owner's
    sandbox; opens meanwhile wait for the same one. If that owner is disposed before it
    finishes, the capture is stopped and the next open starts another under its own
    owner. ``take_notice`` gives the failure's line once, for the first session to show.
    """

    def __init__(self, capture: Callable[[Agent], Awaitable[LoginEnvironment]]) -> None:
        self._capture = capture
        self._task: asyncio.Task[LoginEnvironment] | None = None
        self._noticed = False

    @property
    def result(self) -> LoginEnvironment | None:
        """The finished capture, or ``None`` while none has finished."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.result()

    async def get(self, owner: Agent, cancel: Cancellation) -> LoginEnvironment:
        """The environment, capturing it first if no capture has finished.

        Raises the caller's cancellation reason when ``cancel`` fires first; the capture
        goes on for the other opens.
        """
        while True:
            cancel.raise_if_cancelled()
            task = self._task if self._task is not None else self._start(owner)
            waiter = asyncio.ensure_future(cancel.wait())
            try:
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if not task.done():
                cancel.raise_if_cancelled()
                continue
            if task.cancelled():
                if self._task is task:
                    self._task = None
                continue
            return task.result()

    def take_notice(self) -> str | None:
        """The failed capture's line the first time it is asked for; then ``None``."""
        result = self.result
        if result is None or result.usable or self._noticed:
            return None
        self._noticed = True
        return result.notice()

    def _start(self, owner: Agent) -> asyncio.Task[LoginEnvironment]:
        if not owner.live:
            raise owner_not_live(owner)  # its dispose could never stop the capture
        # A context of its own: the capture is not the session being opened (a recorder
        # that follows the spawning session must not take the login shell for it).
        task = asyncio.get_running_loop().create_task(
            self._logged(owner), context=contextvars.Context()
        )
        self._task = task

        async def stop() -> None:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        remove = owner.on_dispose(stop)
        task.add_done_callback(lambda _: remove())
        return task

    async def _logged(self, owner: Agent) -> LoginEnvironment:
        result = await self._capture(owner)
        if result.usable:
            log.info(
                "login environment captured from %s in %.2f s: %d variables, %d functions, "
                "%d aliases",
                result.shell,
                result.elapsed_s,
                len(result.variables),
                len(result.functions),
                len(result.aliases),
            )
        else:
            log.warning("login environment not applied: %s", result.problem)
        return result


@runtime_checkable
class LoginEnvironmentSource(Protocol):
    """A backend that can show the login environment it applies (``dsh-terminal env``)."""

    @property
    def environment(self) -> str:
        """``"clean"`` or ``"login"``: whether its sessions get the login environment."""
        ...

    async def login_environment(self, owner: Agent) -> LoginEnvironment:
        """Capture (once) and return the login environment, under ``owner``'s sandbox."""
        ...
