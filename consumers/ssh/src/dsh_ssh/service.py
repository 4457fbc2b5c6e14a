"""Owner-scoped ssh sessions over ``ctx.pty``, with one control master per destination.

``open`` makes sure the owner has a live master for the destination (starting one logs
in, which is where every connection, host-key and authentication failure is seen), then
starts a session client over the master's socket and installs the remote prompt
protocol. The master lives while any of the owner's sessions to that destination does.
Control sockets sit in a private 0700 directory per owner, so no other owner's client
can ride on a connection it did not authenticate.

Every ssh id is checked against its owner (``FOREIGN_SESSION`` otherwise), and an
owner's disposal closes its sessions and masters; the pty facade's own cleanup is the
backstop for anything this service could not reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import secrets
import shlex
import shutil
import tempfile
import weakref
from collections.abc import Callable

import attrs

from dsh_pty_session import PtySessionService, PtyWaited
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import DisposeError, ErrorCode, TerminalError
from dsh_terminal_core.sandbox.policy import NetworkAccess, SandboxPolicyService

from .askpass import Askpass, LoginSecrets
from .config import SshConfig
from .diagnose import SECRET_PROMPT, classify
from .errors import SshError
from .options import Destination, master_argv, session_argv
from .remote import RemoteProtocol
from .session import SshSession

__all__ = ["OPENED_BY", "SshService"]

#: What ``terminal_list`` says opened the pty sessions of ssh masters and sessions: the
#: ``ssh_*`` tools drive them, so a model listing its terminals knows not to type there.
OPENED_BY = "ssh"

_ANY_OUTPUT = re.compile(r"\S")

# How long a lost session waits for its master's explanation.
_LAST_WORDS_MS = 2000

_KNOWN_HOST_ADDED = re.compile(r"Warning: Permanently added .* to the list of known hosts\.?$")


@attrs.define(eq=False)
class _Master:
    """An owner's authenticated connection to one destination, in its own pty session."""

    pty_id: str
    control_path: str
    banner: str
    exited: re.Pattern[str]
    users: int = 0

    async def alive(self, pty: PtySessionService, owner: Agent) -> bool:
        """True while the client runs: its shell prints a line with its status when it ends."""
        try:
            waited = await pty.wait(owner, self.pty_id, self.exited, 0)
        except TerminalError:
            return False
        return waited.reason == "timeout"

    async def last_words(self, pty: PtySessionService, owner: Agent) -> str:
        """What the client said when it ended (``Timeout, server ... not responding``).

        A session client learns only that its master hung up; the reason is the
        master's. Waits briefly for the master to finish saying it.
        """
        try:
            waited = await pty.wait(owner, self.pty_id, self.exited, _LAST_WORDS_MS)
        except TerminalError:
            return ""
        said = [
            line.strip()
            for line in waited.text.split("\n")
            if line.strip() and not self.exited.search(line)
        ]
        return "\n".join(said[-3:])


def _split_token() -> tuple[str, str]:
    """A random line the shell prints from two quoted halves, so its echo never matches."""
    first, second = secrets.token_hex(8), secrets.token_hex(8)
    return f"'{first}''{second}'", first + second


class SshService:
    """``open``/``get``/``close`` of remote shells; one instance per harness."""

    def __init__(
        self,
        pty: Callable[[], PtySessionService],
        config: SshConfig,
        policy: Callable[[], SandboxPolicyService | None] | None = None,
    ) -> None:
        self._pty = pty
        self._config = config
        self._policy = policy
        self._ids = itertools.count(1)
        self._sessions: dict[str, SshSession] = {}
        self._session_masters: dict[str, _Master] = {}
        self._masters: weakref.WeakKeyDictionary[Agent, dict[Destination, _Master]] = (
            weakref.WeakKeyDictionary()
        )
        self._master_locks: weakref.WeakKeyDictionary[Agent, dict[Destination, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        self._owner_dirs: weakref.WeakKeyDictionary[Agent, str] = weakref.WeakKeyDictionary()
        self._hooked: weakref.WeakSet[Agent] = weakref.WeakSet()
        self._base_dir: str | None = None
        self._owner_numbers = itertools.count(1)

    @property
    def config(self) -> SshConfig:
        return self._config

    # -- open -----------------------------------------------------------------------------

    async def open(
        self,
        owner: Agent,
        destination: Destination,
        name: str | None = None,
        cancel: Cancellation | None = None,
        login: LoginSecrets | None = None,
    ) -> SshSession:
        """Log in (or reuse the owner's master) and start a remote shell with the protocol.

        Raises :class:`SshError` with ``SSH_CONNECT``, ``SSH_HOST_KEY`` or ``SSH_AUTH``
        as soon as the client's output shows which; nothing is left running then.
        """
        self._check_network(owner)
        self._hook(owner)
        pty = self._pty()
        locks = self._master_locks.setdefault(owner, {})
        lock = locks.setdefault(destination, asyncio.Lock())
        async with lock:
            master = await self._master(pty, owner, destination, cancel, login)
            master.users += 1
        try:
            session = await self._start_session(pty, owner, destination, master, name, cancel)
        except BaseException:
            await self._release(pty, owner, destination, master)
            raise
        self._sessions[session.session_id] = session
        self._session_masters[session.session_id] = master
        return session

    def _check_network(self, owner: Agent) -> None:
        policies = self._policy() if self._policy is not None else None
        if policies is None:
            return
        policy = policies.resolve(owner)
        if policy.confined and policy.network is NetworkAccess.NONE:
            raise SshError(
                "this owner's shells run confined with no network (sandbox-policy.network = "
                '"none"), so ssh cannot reach any host; the operator must set '
                'sandbox-policy.network = "host" (or choose danger-full-access)',
                ErrorCode.SSH_CONNECT,
            )

    def _control_dir(self, owner: Agent) -> str:
        found = self._owner_dirs.get(owner)
        if found is not None:
            return found
        if self._base_dir is None:
            self._base_dir = tempfile.mkdtemp(prefix="dsh-ssh-", dir=self._config.control_dir)
        path = os.path.join(self._base_dir, f"o{next(self._owner_numbers)}")
        os.mkdir(path, 0o700)
        self._owner_dirs[owner] = path
        return path

    async def _master(
        self,
        pty: PtySessionService,
        owner: Agent,
        destination: Destination,
        cancel: Cancellation | None,
        login: LoginSecrets | None,
    ) -> _Master:
        masters = self._masters.setdefault(owner, {})
        master = masters.get(destination)
        if master is not None:
            if await master.alive(pty, owner):
                return master
            del masters[destination]
            with contextlib.suppress(TerminalError):
                await pty.close(owner, master.pty_id)
        askpass = None
        if login:
            askpass = Askpass(self._control_dir(owner), login)
            await askpass.start()
        try:
            master = await self._start_master(pty, owner, destination, cancel, login, askpass)
        finally:
            if askpass is not None:
                await askpass.aclose()
        masters[destination] = master
        return master

    async def _start_master(
        self,
        pty: PtySessionService,
        owner: Agent,
        destination: Destination,
        cancel: Cancellation | None,
        login: LoginSecrets | None = None,
        askpass: Askpass | None = None,
    ) -> _Master:
        """Start ``ssh -M -N`` as a background job of a fresh shell and wait for login.

        The client never reads the terminal, so the shell hands the terminal to a
        ``cat`` that does (the open settles at once instead of after the backend's
        silence bound) and never prints a prompt into the client's output. The job stays
        in the terminal's session, so closing that session ends it; it prints a start
        line before the client and its exit status after it, then hangs the terminal up.
        The client prints the ready line (``LocalCommand``) only once authenticated.
        """
        directory = self._control_dir(owner)
        control_path = os.path.join(directory, "%C")
        start_typed, start = _split_token()
        exit_typed, exit_line = _split_token()
        ready = "ready-" + secrets.token_hex(16)
        # One prompt of each kind may reach the helper (the client counts key passphrase
        # and password prompts alike); with no secret named, none is ever shown.
        prompts = 1 if askpass is not None else 0
        argv = master_argv(self._config, destination, control_path, ready, prompts)
        if askpass is not None:
            # Every prompt goes to the helper, never to the terminal.
            argv = ["env", *(f"{k}={v}" for k, v in askpass.env().items()), *argv]
        known_hosts_dir = os.path.dirname(self._config.known_hosts)
        command = (
            f"set +m; (umask 077; mkdir -p {shlex.quote(directory)} "
            f"{shlex.quote(known_hosts_dir)}); "
            f"(echo {start_typed}; {shlex.join(argv)}; echo {exit_typed}:$?; kill -HUP $$) & "
            "exec cat >/dev/null"
        )
        opened = await pty.open(owner, {"command": command}, cancel, opened_by=OPENED_BY)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._config.open_timeout_s
            await self._expect_line(pty, owner, opened.session_id, start, deadline)
            done = re.compile(rf"{ready}$|{exit_line}:\d+$")
            either = re.compile(f"{done.pattern}|{SECRET_PROMPT.pattern}")
            collected: list[str] = []
            while True:
                remaining = max(0, int((deadline - loop.time()) * 1000))
                waited = await pty.wait(owner, opened.session_id, either, remaining, partial=True)
                collected.append(waited.text)
                text = "".join(collected)
                if waited.reason == "match" and waited.matched_open:
                    raise SshError(
                        f"{_where(destination)} asks for a secret and no secret source can "
                        f"answer it: {waited.matched!r}; use a key without a passphrase "
                        "(identityFile) or an ssh agent",
                        ErrorCode.SSH_AUTH,
                        text + (waited.matched or ""),
                    )
                if waited.reason == "match" and (waited.matched or "").endswith(ready):
                    banner = _banner(text.split("\n")[:-2])
                    return _Master(
                        pty_id=opened.session_id,
                        control_path=control_path,
                        banner=banner,
                        exited=re.compile(rf"{exit_line}:\d+$"),
                    )
                if waited.reason == "exit" or (
                    waited.reason == "match" and done.search(waited.matched or "")
                ):
                    said = "\n".join(line for line in text.split("\n") if exit_line not in line)
                    raise _login_failed(destination, said + waited.open_line)
                if waited.reason == "timeout":
                    raise SshError(
                        f"logging in to {_where(destination)} did not finish within "
                        f"{self._config.open_timeout_s} s (open_timeout_s)",
                        ErrorCode.SSH_CONNECT,
                        text,
                    )
        except BaseException:
            await _close_quietly(pty, owner, opened.session_id)
            raise

    async def _expect_line(
        self, pty: PtySessionService, owner: Agent, pty_id: str, line: str, deadline: float
    ) -> str:
        remaining = max(0, int((deadline - asyncio.get_running_loop().time()) * 1000))
        waited = await pty.wait(owner, pty_id, re.compile(rf"{line}$"), remaining)
        if waited.reason != "match":
            raise SshError(
                f"the local shell did not start the ssh client: {waited.text.strip()[-300:]}",
                ErrorCode.SSH_CONNECT,
                waited.text,
            )
        return waited.text

    async def _start_session(
        self,
        pty: PtySessionService,
        owner: Agent,
        destination: Destination,
        master: _Master,
        name: str | None,
        cancel: Cancellation | None,
    ) -> SshSession:
        """Start ``ssh -tt`` over the master, install the prompt protocol, read the motd."""
        start_typed, start = _split_token()
        argv = session_argv(self._config, destination, master.control_path)
        # ``cat`` relays the terminal to the client: a multiplexed client hands its
        # stdin to the master, so without a relay no process of this terminal's
        # foreground would be seen reading it, and every write would settle only after
        # the backend's silence bound. The terminal is raw, so ^C is a byte for the
        # remote side, never a local signal. When the client ends, the shell is hung up,
        # which ends the relay and the whole local session with it.
        command = (
            f"echo {start_typed}; stty raw -echo; cat | {{ {shlex.join(argv)}; kill -HUP $$; }}"
        )
        opened = await pty.open(owner, {"command": command}, cancel, opened_by=OPENED_BY)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._config.open_timeout_s
            await self._expect_line(pty, owner, opened.session_id, start, deadline)
            protocol = RemoteProtocol()
            first, seen = await self._setup_terminal(
                pty, owner, opened.session_id, protocol, deadline, cancel
            )
            waited = first
            if first.reason == "match":
                setup = {"data": protocol.setup_prompt() + "\n", "submit": False}
                await pty.send(owner, opened.session_id, setup, cancel)
                remaining = max(0, int((deadline - loop.time()) * 1000))
                waited = await pty.wait(
                    owner, opened.session_id, protocol.prompt_pattern(0), remaining
                )
            if waited.reason != "match":
                text = waited.text + waited.open_line
                if waited.reason == "exit":
                    raise _login_failed(destination, text)
                raise SshError(
                    f"the remote shell on {_where(destination)} did not take the prompt "
                    "protocol (it must be bash or a POSIX sh) within "
                    f"{self._config.open_timeout_s} s: {text.strip()[-300:]}",
                    ErrorCode.SSH_CONNECT,
                    text,
                )
            motd = _banner(
                line for line in seen.split("\n")[:-2] if not RemoteProtocol.is_setup_echo(line)
            )
        except BaseException:
            await _close_quietly(pty, owner, opened.session_id)
            raise
        banner = "\n".join(part for part in (master.banner, motd) if part)
        said = protocol.setup_terminal()[1].search(first.matched or "")
        remote_user = said["user"] if said is not None and said["user"] else None
        return SshSession(
            session_id=f"ssh-{next(self._ids)}",
            owner=owner,
            destination=destination,
            pty=pty,
            pty_id=opened.session_id,
            protocol=protocol,
            config=self._config,
            banner=banner,
            name=name,
            user=remote_user or destination.user,
            master_words=lambda: master.last_words(pty, owner),
        )

    async def _setup_terminal(
        self,
        pty: PtySessionService,
        owner: Agent,
        pty_id: str,
        protocol: RemoteProtocol,
        deadline: float,
        cancel: Cancellation | None,
    ) -> tuple[PtyWaited, str]:
        """Type the terminal setup line until the remote shell answers it.

        Input that reaches a remote terminal before its login shell has started can be
        discarded on the way (the shell or the line discipline flushes what was typed
        ahead), and nothing before the shell's prompt — which ends no line — says when
        it is safe. So the line is typed once the login's first output (motd or prompt)
        has arrived, and again, at growing intervals, until its answer arrives; a copy
        that did survive only runs the same idempotent setup twice.
        Returns the last wait and all the text consumed (the motd is in it).
        """
        loop = asyncio.get_running_loop()
        line, done = protocol.setup_terminal()
        seen: list[str] = []
        # Most shells are reading once anything of the login (motd, prompt) has arrived.
        first_output = await pty.wait(
            owner,
            pty_id,
            _ANY_OUTPUT,
            int(min(2.0, max(0.0, deadline - loop.time())) * 1000),
            partial=True,
        )
        seen.append(first_output.text)
        if first_output.reason == "exit":
            return first_output, "".join(seen)
        interval = 0.2
        while True:
            await pty.send(owner, pty_id, {"data": line + "\n", "submit": False}, cancel)
            remaining = max(0.0, deadline - loop.time())
            waited = await pty.wait(owner, pty_id, done, int(min(interval, remaining) * 1000))
            seen.append(waited.text)
            if waited.reason != "timeout" or loop.time() >= deadline:
                return waited, "".join(seen)
            interval = min(interval * 2, 2.0)

    # -- lookup and close -----------------------------------------------------------------

    def get(self, owner: Agent, session_id: str) -> SshSession:
        """The owner's session ``session_id``; ``NO_SESSION``/``FOREIGN_SESSION`` otherwise."""
        session = self._sessions.get(session_id)
        if session is None:
            raise TerminalError(f"no ssh session {session_id!r}", ErrorCode.NO_SESSION)
        if session.owner is not owner:
            raise TerminalError(
                f"ssh session {session_id!r} belongs to another agent", ErrorCode.FOREIGN_SESSION
            )
        return session

    def sessions(self, owner: Agent) -> list[SshSession]:
        return [s for s in self._sessions.values() if s.owner is owner]

    async def close(self, owner: Agent, session_id: str) -> bool:
        """Close the session (and the master when it was the last user); False if gone."""
        try:
            session = self.get(owner, session_id)
        except TerminalError as exc:
            if exc.code == ErrorCode.NO_SESSION:
                return False
            raise
        del self._sessions[session_id]
        master = self._session_masters.pop(session_id)
        session.closed = True
        pty = self._pty()
        try:
            await pty.close(owner, session.pty_id)
        finally:
            await session.settle()
            await self._release(pty, owner, session.destination, master)
        return True

    async def _release(
        self, pty: PtySessionService, owner: Agent, destination: Destination, master: _Master
    ) -> None:
        """One session less on ``master``; the last one out closes it."""
        master.users -= 1
        if master.users > 0:
            return
        masters = self._masters.get(owner)
        if masters is not None and masters.get(destination) is master:
            del masters[destination]
        await _close_quietly(pty, owner, master.pty_id)

    async def dispose_owner(self, owner: Agent) -> None:
        """Close every session and master of ``owner`` and remove its control directory."""
        errors: list[BaseException] = []
        for session in self.sessions(owner):
            try:
                await self.close(owner, session.session_id)
            except Exception as exc:
                errors.append(exc)
        pty = self._pty()
        for master in list((self._masters.pop(owner, None) or {}).values()):
            await _close_quietly(pty, owner, master.pty_id)
        self._master_locks.pop(owner, None)
        directory = self._owner_dirs.pop(owner, None)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        if self._base_dir is not None and not self._owner_dirs:
            # The last owner is gone: leave nothing behind in the temporary directory.
            with contextlib.suppress(OSError):
                os.rmdir(self._base_dir)
                self._base_dir = None
        if errors:
            raise DisposeError(f"closing the ssh sessions of {owner!r} failed", errors)

    def dispose(self) -> None:
        """Remove the control directories (sessions are closed by their owners' disposal)."""
        if self._base_dir is not None:
            shutil.rmtree(self._base_dir, ignore_errors=True)
            self._base_dir = None

    def _hook(self, owner: Agent) -> None:
        if owner in self._hooked or not owner.live:
            return
        self._hooked.add(owner)
        ref = weakref.ref(owner)

        async def disposed() -> None:
            agent = ref()
            if agent is not None:
                await self.dispose_owner(agent)

        owner.on_dispose(disposed)


def _where(destination: Destination) -> str:
    user = f"{destination.user}@" if destination.user else ""
    return f"{user}{destination.host}:{destination.port}"


def _banner(lines: object) -> str:
    kept = [
        line
        for line in lines  # type: ignore[attr-defined]
        if not _KNOWN_HOST_ADDED.search(line)
    ]
    return "\n".join(kept).strip("\n")


def _login_failed(destination: Destination, text: str) -> SshError:
    code = classify(text)
    said = [line for line in text.strip().splitlines() if line.strip()]
    detail = said[-1] if said else "the ssh client exited without a message"
    what = {
        ErrorCode.SSH_HOST_KEY: "refused the host key of",
        ErrorCode.SSH_AUTH: "could not log in to",
    }.get(code, "could not connect to")
    hint = ""
    if code == ErrorCode.SSH_AUTH:
        hint = (
            " (no password or key passphrase is ever typed: use a key the server accepts "
            "that has no passphrase, or one held by an ssh agent)"
        )
    return SshError(f"ssh {what} {_where(destination)}: {detail}{hint}", code, text)


async def _close_quietly(pty: PtySessionService, owner: Agent, pty_id: str) -> None:
    with contextlib.suppress(TerminalError):
        await pty.close(owner, pty_id)
