"""Validated configuration of the ssh consumer (plugin section ``ssh``)."""

from __future__ import annotations

import os
from typing import Any

import attrs

from dsh_terminal_core.kernel.config import non_empty_str, positive_int

__all__ = ["HOST_KEY_POLICIES", "SshConfig", "default_known_hosts_file"]

HOST_KEY_POLICIES = ("accept-new", "strict")


def default_known_hosts_file() -> str:
    """The plugin's own known-hosts file, apart from the user's ``~/.ssh/known_hosts``."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(state, "dsh-ssh", "known_hosts")


def _host_key_policy(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in HOST_KEY_POLICIES:
        raise ValueError(
            f"{attribute.name} must be one of {', '.join(map(repr, HOST_KEY_POLICIES))}; "
            f"got {value!r}"
        )


def _absolute_or_none(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not os.path.isabs(value)):
        raise ValueError(f"{attribute.name} must be an absolute path; got {value!r}")


@attrs.frozen(kw_only=True)
class SshConfig:
    """How the plugin runs the OpenSSH client; every option it passes comes from here.

    ``known_hosts_file``: the only known-hosts file the client reads and writes (the
    user's own and the system's are not consulted); ``None`` means
    ``$XDG_STATE_HOME/dsh-ssh/known_hosts``. ``host_key_policy``: ``accept-new`` records
    the key of a host seen for the first time and refuses a changed one; ``strict``
    also refuses unknown hosts. ``connect_timeout_s`` bounds the TCP connect and the
    key exchange; ``server_alive_interval_s`` x ``server_alive_count_max`` bounds how
    long a dead link goes unnoticed. ``open_timeout_s`` bounds a whole ``ssh_open``.
    ``control_dir``: where the per-owner control sockets live (a private 0700 directory
    is created inside it); ``None`` means the system temporary directory.
    """

    known_hosts_file: str | None = attrs.field(default=None, validator=_absolute_or_none)
    host_key_policy: str = attrs.field(default="accept-new", validator=_host_key_policy)
    connect_timeout_s: int = attrs.field(default=10, validator=positive_int)
    server_alive_interval_s: int = attrs.field(default=5, validator=positive_int)
    server_alive_count_max: int = attrs.field(default=3, validator=positive_int)
    open_timeout_s: int = attrs.field(default=30, validator=positive_int)
    interrupt_wait_ms: int = attrs.field(default=5000, validator=positive_int)
    ssh_path: str = attrs.field(default="ssh", validator=non_empty_str)
    control_dir: str | None = attrs.field(default=None, validator=_absolute_or_none)

    @property
    def known_hosts(self) -> str:
        return self.known_hosts_file or default_known_hosts_file()
