"""The shell backends: spawn a shell under the owner's sandbox policy.

:class:`ShellBackend` is the shell-neutral base every shell backend is built from (bash
here; zsh and fish in their own distributions): the config, the sandbox, the spawn, the
session and the login environment (``environment = "login"``, captured once per backend
by a :class:`~dsh_terminal_core.sandbox.login.LoginCapture`) are shared, and a
:class:`~.shell.ShellPolicy` says what is the shell's own (how its sessions replay a login
shell's functions and aliases among it).
:class:`BashBackend` is that base with bash's policy (type ``shell``).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import InvalidArgument, SandboxUnavailable, TerminalError
from dsh_terminal_core.kernel.turns import take_turn
from dsh_terminal_core.provider import TerminalProvider, TerminalSpawnSpec
from dsh_terminal_core.registry import BackendSpawnContext
from dsh_terminal_core.sandbox.login import (
    LoginCapture,
    LoginEnvironment,
    capture_under_policy,
    user_login_shell,
)

from .config import BashConfig
from .environment import BASH, LINE_TERM, owner_marker, session_environment
from .login import login_variables
from .screen import ScreenEmulator
from .session import BashSession
from .shell import ShellPolicy

__all__ = ["BashBackend", "ShellBackend"]


class ShellBackend:
    """Creates sessions of one shell program; registered with ``ctx.terminals``.

    ``sandbox_policy`` decides the mode per owner; ``sandbox`` (may be None) confines
    the argv. A confined mode without a sandbox fails before anything is spawned.
    ``shell`` is the shell's own part (its prompt protocol and continuation prompts).
    ``owner_limits`` (may be None) puts each shell in a cgroup of its own under its
    owner's limits (SPEC §29), confined or not.
    """

    def __init__(
        self,
        provider: TerminalProvider,
        sandbox_policy: Any,
        sandbox: Any | None,
        config: BashConfig,
        shell: ShellPolicy,
        *,
        owner_limits: Any | None = None,
    ) -> None:
        self._provider = provider
        self._policy = sandbox_policy
        self._sandbox = sandbox
        self._config = config
        self._shell = shell
        self._limits = owner_limits
        self._login = LoginCapture(self._capture_login)

    @property
    def type(self) -> str:
        return self._config.backend_type

    @property
    def exports_env(self) -> bool:
        """Its sessions are interactive shells, which run ``export NAME=value`` lines
        (fish through its ``export`` function)."""
        return True

    def process_marker(self, owner_id: str) -> dict[str, str]:
        """What every process of ``owner_id``'s shells carries in its environment."""
        return owner_marker(owner_id)

    @property
    def config(self) -> BashConfig:
        return self._config

    @property
    def environment(self) -> str:
        """``"clean"`` or ``"login"`` (SPEC §32.1): what its sessions start from."""
        return self._config.environment

    async def login_environment(self, owner: Agent) -> LoginEnvironment:
        """The login environment (captured once, under ``owner``'s sandbox if first)."""
        return await self._login.get(owner, Cancellation())

    async def _capture_login(self, owner: Agent) -> LoginEnvironment:
        policy = self._policy.resolve(owner) if self._policy is not None else None
        return await capture_under_policy(
            self._provider,
            policy,
            self._sandbox,
            shell=self._config.login_shell or user_login_shell() or self._config.shell_path,
            env={**owner_marker(owner.id), "TERM": LINE_TERM, "HISTFILE": ""},
            timeout_s=self._config.login_timeout_ms / 1000,
        )

    def _argv_and_cwd(
        self, context: BackendSpawnContext, policy: Any, login_rc: bool = False
    ) -> tuple[list[str], str]:
        config = self._config
        replay = self._shell.login_replay
        args = replay.args(config.shell_args) if login_rc and replay else config.shell_args
        argv = [config.shell_path, *args, *self._shell.protocol_args]
        cwd = context.cwd or (policy.workspace_root if policy is not None else os.getcwd())
        if not os.path.isabs(cwd):
            base = policy.workspace_root if policy is not None else os.getcwd()
            cwd = os.path.normpath(os.path.join(base, cwd))
        if not os.path.isdir(cwd):
            raise InvalidArgument(f"cwd {cwd!r} is not an existing directory")
        if not (os.path.isfile(config.shell_path) and os.access(config.shell_path, os.X_OK)):
            raise TerminalError(
                f"shell {config.shell_path!r} does not exist or is not executable "
                f"(set {self._shell.section}.shell_path)",
                "SPAWN_FAILED",
            )
        if policy is not None and policy.confined:
            if self._sandbox is None:
                raise SandboxUnavailable(
                    f"sandbox mode {str(policy.mode)!r} needs a sandbox provider, and no loaded "
                    "plugin provides 'sandbox'. This is the host's setting, which no tool call "
                    "can change: the operator must load the sandbox-bwrap plugin (part of "
                    "dsh-terminal-core) with bubblewrap installed, or choose sandbox mode "
                    "'danger-full-access' explicitly"
                )
            argv = self._sandbox.confine(argv, policy)
        return argv, cwd

    async def spawn(self, context: BackendSpawnContext) -> BashSession:
        context.cancel.raise_if_cancelled()
        policy = self._policy.resolve(context.owner) if self._policy is not None else None
        confined = policy is not None and policy.confined
        login: dict[str, str] = {}
        login_rc = False
        if self._config.environment == "login":
            captured = await self._login.get(context.owner, context.cancel)
            login, login_rc = login_variables(
                captured, self._shell.login_replay, confined=confined
            )
        argv, cwd = self._argv_and_cwd(context, policy, login_rc)
        # The environment and the spec are built in a turn of their own: after a quiet
        # spell every step of an open runs from cold caches, several times its usual
        # length, and two short steps keep the loop freer than one long one.
        await take_turn()
        cgroup = None
        if self._limits is not None:
            cgroup = self._limits.session_cgroup(context.owner, context.session_id)
        # From here the provider owns the cgroup: it removes it whether the spawn works.
        spec = TerminalSpawnSpec(
            argv=argv,
            cwd=cwd,
            env={
                **login,
                **session_environment(
                    context.owner.id,
                    context.session_id,
                    private_tmp=confined,
                    screen=context.screen,
                ),
                **self._shell.environment,
            },
            rows=context.rows or self._config.rows,
            cols=context.cols or self._config.cols,
            grace_ms=self._config.dispose_grace_ms,
            cgroup=cgroup,
            quiet_helpers=self._shell.quiet_helpers,
        )
        process = await self._provider.spawn_terminal(spec)
        session = BashSession(
            process,
            self._config,
            context.session_id,
            screen=ScreenEmulator(spec.rows, spec.cols) if context.screen else None,
            signals_folded=confined,
            size=(spec.rows, spec.cols),
            shell=self._shell,
        )
        try:
            await session.start(context.cancel)
        except BaseException:
            # start() already tore the process down; make certain on any other path.
            if not process.done.done():
                await asyncio.shield(process.terminate())
            raise
        notice = self._login.take_notice()
        if notice is not None:
            session.add_notice(notice)
        return session


class BashBackend(ShellBackend):
    """The bash backend (type ``shell`` by default): the base with bash's policy."""

    def __init__(
        self,
        provider: TerminalProvider,
        sandbox_policy: Any,
        sandbox: Any | None,
        config: BashConfig,
        *,
        owner_limits: Any | None = None,
    ) -> None:
        super().__init__(
            provider, sandbox_policy, sandbox, config, BASH, owner_limits=owner_limits
        )
