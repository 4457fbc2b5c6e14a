"""The OpenSSH client command lines the plugin runs: every option is the plugin's choice.

Two processes per destination and owner: a *master* (``-M -N``) that connects and
authenticates once and holds the connection, and one *session* client per ``ssh_open``
that multiplexes a remote login shell over the master's control socket. The master is
where every connection and authentication failure shows up; a session only ever talks
to the local socket, so a second open to the same host costs no handshake.
"""

from __future__ import annotations

import re

import attrs

from .config import SshConfig

__all__ = ["Destination", "master_argv", "session_argv"]

# A host as ssh takes it: a name, an IPv4 address or a bracket-free IPv6 address.
_HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]+$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]*$")


@attrs.frozen(kw_only=True)
class Destination:
    """Where to connect and as whom; equal destinations share one master per owner."""

    host: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.host or self.host.startswith("-") or not _HOST.match(self.host):
            raise ValueError(f"host {self.host!r} is not a host name or address")
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ValueError(f"port must be an integer; got {self.port!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be within 1..65535; got {self.port}")
        if self.user is not None and not _USER.match(self.user):
            raise ValueError(f"user {self.user!r} is not a user name")
        if self.identity_file is not None and (
            not self.identity_file or "\n" in self.identity_file or "\0" in self.identity_file
        ):
            raise ValueError(f"identityFile {self.identity_file!r} is not a file path")


def _common(
    config: SshConfig, destination: Destination, control_path: str, password_prompts: int = 0
) -> list[str]:
    strict = "yes" if config.host_key_policy == "strict" else "accept-new"
    argv = [
        config.ssh_path,
        "-o", f"UserKnownHostsFile={config.known_hosts}",
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", f"StrictHostKeyChecking={strict}",
        "-o", "UpdateHostKeys=no",
        "-o", "HashKnownHosts=no",
        "-o", f"ConnectTimeout={config.connect_timeout_s}",
        "-o", f"ServerAliveInterval={config.server_alive_interval_s}",
        "-o", f"ServerAliveCountMax={config.server_alive_count_max}",
        # Not batch mode (a secret source may answer prompts), but nothing is ever typed by
        # guesswork: unless a password secret was named, the client asks for no password
        # or keyboard-interactive answer and reports the refusal at once.
        "-o", "BatchMode=no",
        "-o", f"NumberOfPasswordPrompts={password_prompts}",
        "-o", "ForwardAgent=no",
        "-o", "ForwardX11=no",
        "-o", "ClearAllForwardings=yes",
        "-o", f"ControlPath={control_path}",
        "-p", str(destination.port),
    ]  # fmt: skip
    if destination.identity_file is not None:
        argv += ["-o", "IdentitiesOnly=yes", "-i", destination.identity_file]
    if destination.user is not None:
        argv += ["-l", destination.user]
    return argv


def master_argv(
    config: SshConfig,
    destination: Destination,
    control_path: str,
    ready_line: str,
    password_prompts: int = 0,
) -> list[str]:
    """The master: authenticate, print ``ready_line`` (locally), then hold the connection.

    ``LocalCommand`` runs on this machine only after authentication succeeded, so the
    ready line is proof of login that no remote output can forge before it. ``-n`` and
    ``-N``: the master never reads the terminal and runs nothing remotely.
    """
    return [
        *_common(config, destination, control_path, password_prompts),
        "-M", "-N", "-n",
        "-o", "ControlMaster=yes",
        "-o", "ControlPersist=no",
        "-o", "PermitLocalCommand=yes",
        "-o", f"LocalCommand=echo {ready_line}",
        "--", destination.host,
    ]  # fmt: skip


def session_argv(config: SshConfig, destination: Destination, control_path: str) -> list[str]:
    """A login shell with a remote terminal, multiplexed over the master.

    ``BatchMode=yes`` here only matters if the master is gone: the client then refuses
    to log in on its own rather than prompt. ``EscapeChar=none`` so no command text
    (``~.`` after a newline) can act on the client.
    """
    return [
        *_common(config, destination, control_path),
        "-tt",
        "-o", "ControlMaster=no",
        "-o", "BatchMode=yes",
        "-o", "EscapeChar=none",
        "--", destination.host,
    ]  # fmt: skip
