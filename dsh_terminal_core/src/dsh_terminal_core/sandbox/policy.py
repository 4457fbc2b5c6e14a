"""Sandbox policy: which confinement each owner's terminals run under.

The policy is deliberately separate from the mechanism (:mod:`.bwrap`): a backend asks
the policy *what* an owner may touch and asks the sandbox *how* to enforce it. The
deployment default is safe (``workspace-write`` over the current directory); running
unconfined has to be chosen by name.

The mode fence lives here because only the policy knows an owner's effective mode. A
persistent shell started under one mode keeps that confinement for its whole life, so
letting the mode change underneath it would make the reported policy a lie; the change
is refused until the owner's sessions are closed.

The policy also names each owner's private ``/tmp``: a directory on the host, created by
the sandbox when the owner's first confined shell starts, shared by all of that owner's
shells (so files handed between them through ``/tmp`` still arrive) and removed when the
owner is disposed, after its sessions are closed. The owner's home store (where what its
shells write under ``$HOME`` lands, SPEC §32.3; :mod:`.home`) is named, shared and
removed the same way.
"""

from __future__ import annotations

import contextlib
import enum
import os
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs
import psutil

from ..kernel.agents import Agent
from ..kernel.errors import TerminalError
from .home import DEFAULT_STATE_DIRS, check_state_dirs

__all__ = [
    "ActivityProbe",
    "HomeAccess",
    "NetworkAccess",
    "OwnerActivity",
    "Policy",
    "SandboxMode",
    "SandboxPolicyConfig",
    "SandboxPolicyService",
]

ActivityProbe = Callable[[Agent], bool]


@runtime_checkable
class OwnerActivity(Protocol):
    """What the mode fence needs from the session registry (``ctx.terminals``)."""

    def has_owner_activity(self, owner: Agent) -> bool:
        """True while ``owner`` has a session open or a spawn in flight."""
        ...


class SandboxMode(enum.StrEnum):
    """How much of the filesystem a sandboxed terminal may write."""

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


class NetworkAccess(enum.StrEnum):
    """Whether a confined shell has a network: none at all, or the host's."""

    NONE = "none"
    HOST = "host"


class HomeAccess(enum.StrEnum):
    """What a confined shell's writes under ``$HOME`` do: land in an owner-private store
    (the user's files read-only over it), or fail as on the rest of the read-only tree."""

    PRIVATE = "private"
    READ_ONLY = "read-only"


_ALLOWED = ", ".join(repr(m.value) for m in SandboxMode)
_ALLOWED_NETWORK = ", ".join(repr(n.value) for n in NetworkAccess)
_ALLOWED_HOME = ", ".join(repr(h.value) for h in HomeAccess)
_TMP_PREFIX = "dsh-tmp-"
_HOME_PREFIX = "dsh-home-"


def _to_mode(value: SandboxMode | str) -> SandboxMode:
    """Convert a config or tool string to a mode; ``ValueError`` names the allowed values."""
    if isinstance(value, SandboxMode):
        return value
    if isinstance(value, str):
        try:
            return SandboxMode(value)
        except ValueError:
            pass
    raise ValueError(f"sandbox mode must be one of {_ALLOWED}; got {value!r}")


def _to_network(value: NetworkAccess | str) -> NetworkAccess:
    """Convert a config string to a network setting; ``ValueError`` names the allowed values."""
    if isinstance(value, NetworkAccess):
        return value
    if isinstance(value, str):
        try:
            return NetworkAccess(value)
        except ValueError:
            pass
    raise ValueError(f"network must be one of {_ALLOWED_NETWORK}; got {value!r}")


def _to_home(value: HomeAccess | str) -> HomeAccess:
    """Convert a config string to a home setting; ``ValueError`` names the allowed values."""
    if isinstance(value, HomeAccess):
        return value
    if isinstance(value, str):
        try:
            return HomeAccess(value)
        except ValueError:
            pass
    raise ValueError(f"home must be one of {_ALLOWED_HOME}; got {value!r}")


def _check_absolute(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not os.path.isabs(value):
        raise ValueError(f"{attribute.name} must be an absolute path; got {value!r}")


def _check_optional_absolute(
    _inst: object, attribute: attrs.Attribute[str | None], value: str | None
) -> None:
    if value is not None and not os.path.isabs(value):
        raise ValueError(f"{attribute.name} must be an absolute path or None; got {value!r}")


def _to_workspace_root(value: str | None) -> str | None:
    """Resolve a configured workspace root, refusing what cannot be bound into a sandbox.

    The path is resolved with ``realpath`` so the bind mount and the reported policy name
    the same directory the kernel will see, whatever symlinks led there.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"workspace_root must be a non-empty string; got {value!r}")
    if not os.path.isabs(value):
        raise ValueError(f"workspace_root must be an absolute path; got {value!r}")
    if not os.path.isdir(value):
        raise ValueError(f"workspace_root {value!r} does not exist or is not a directory")
    return os.path.realpath(value)


@attrs.frozen
class Policy:
    """The confinement one owner's terminals get.

    ``mode`` and ``workspace_root`` say what may be written; ``network`` whether a
    confined shell reaches any network (``none``: only its own loopback; ``host``: the
    host's, loopback services included) — a consumer that needs the network (ssh) reads
    it to refuse early and clearly. ``tmp_dir`` is the host directory bound at ``/tmp``
    inside the sandbox; ``None`` gives each shell a fresh, empty ``/tmp`` of its own.
    ``home_dir`` is the owner's home store, layered under the user's ``$HOME`` with
    ``home_state_dirs`` writable in it (:mod:`.home`); ``None`` leaves ``$HOME`` as
    read-only as the rest of the tree.
    """

    mode: SandboxMode = attrs.field(converter=_to_mode)
    workspace_root: str = attrs.field(validator=_check_absolute)
    network: NetworkAccess = attrs.field(
        default=NetworkAccess.NONE, converter=_to_network, kw_only=True
    )
    tmp_dir: str | None = attrs.field(
        default=None, validator=_check_optional_absolute, kw_only=True
    )
    home_dir: str | None = attrs.field(
        default=None, validator=_check_optional_absolute, kw_only=True
    )
    home_state_dirs: tuple[str, ...] = attrs.field(
        default=DEFAULT_STATE_DIRS, converter=check_state_dirs, kw_only=True
    )

    @property
    def confined(self) -> bool:
        """True when a sandbox must wrap the shell (every mode but danger-full-access)."""
        return self.mode is not SandboxMode.DANGER_FULL_ACCESS


@attrs.frozen(kw_only=True)
class SandboxPolicyConfig:
    """Config of the ``sandbox-policy`` plugin.

    ``mode`` is the deployment default for every owner without an override.
    ``workspace_root`` is the directory ``workspace-write`` may modify and where shells
    start; ``None`` means the current directory when the service is created.
    ``network`` is ``"none"`` (confined shells have no network) unless the operator opts
    in to the host's network with ``"host"``; it does not apply to danger-full-access.
    ``home`` is ``"private"`` (confined shells write under ``$HOME`` into an
    owner-private store, the user's own files read-only; ``home_state_dirs`` are the
    store's own, fresh) or ``"read-only"`` (``$HOME`` as read-only as the whole tree).
    """

    mode: SandboxMode = attrs.field(default=SandboxMode.WORKSPACE_WRITE, converter=_to_mode)
    workspace_root: str | None = attrs.field(default=None, converter=_to_workspace_root)
    network: NetworkAccess = attrs.field(default=NetworkAccess.NONE, converter=_to_network)
    home: HomeAccess = attrs.field(default=HomeAccess.PRIVATE, converter=_to_home)
    home_state_dirs: tuple[str, ...] = attrs.field(
        default=DEFAULT_STATE_DIRS, converter=check_state_dirs
    )


class SandboxPolicyService:
    """Resolve each owner's policy and guard mode changes with the mode fence.

    Overrides are keyed by the :class:`Agent` object itself (identity, weakly held), so a
    second agent with the same id never inherits another's mode and a dropped agent
    leaves nothing behind. ``forget`` removes an override explicitly at owner disposal.

    Resolving a confined policy for a live owner names its private ``/tmp`` (a fresh,
    unguessable path under the host's temporary directory; the sandbox creates it) and
    arranges, once per owner, for that directory to be removed when the owner is
    disposed — as a late effect, after the owner's sessions are closed. A host killed
    outright disposes nothing; its directories carry its pid and start time, and the
    first service to name a directory afterwards removes those whose host is gone.
    """

    def __init__(
        self, config: SandboxPolicyConfig | None = None, activity: ActivityProbe | None = None
    ) -> None:
        config = config if config is not None else SandboxPolicyConfig()
        root = config.workspace_root
        if root is None:
            root = os.path.realpath(os.getcwd())
        self._default = Policy(
            config.mode, root, network=config.network, home_state_dirs=config.home_state_dirs
        )
        self._private_home = config.home is HomeAccess.PRIVATE
        self._overrides: weakref.WeakKeyDictionary[Agent, SandboxMode] = weakref.WeakKeyDictionary()
        self._tmp_dirs: weakref.WeakKeyDictionary[Agent, tuple[str, str | None]] = (
            weakref.WeakKeyDictionary()
        )
        self._swept = False
        # "Does this owner have open or in-flight sessions?" The plugin container wires
        # it to ctx.terminals; without it the fence has nothing to consult.
        self._activity = activity

    @property
    def default(self) -> Policy:
        """The deployment default every owner without an override gets."""
        return self._default

    def resolve(self, owner: Agent) -> Policy:
        """Return ``owner``'s effective policy: its override, else the deployment default.

        A confined policy carries the owner's private ``/tmp`` path (and, with ``home =
        "private"``, its home store) while the owner is live; an owner already being
        disposed gets none (its shells, if any were still started, would get a throwaway
        ``/tmp`` each and a read-only ``$HOME``).
        """
        mode = self._overrides.get(owner, self._default.mode)
        # Policies are frozen: an owner on the default mode shares the default itself.
        policy = self._default
        if mode != policy.mode:
            policy = attrs.evolve(policy, mode=mode)
        if not policy.confined:
            return policy
        private = self._private_dirs(owner)
        if private is None:
            return policy
        return attrs.evolve(policy, tmp_dir=private[0], home_dir=private[1])

    def _private_dirs(self, owner: Agent) -> tuple[str, str | None] | None:
        """The owner's private ``/tmp`` and home store (host paths the sandbox creates)."""
        paths = self._tmp_dirs.get(owner)
        if paths is not None or not owner.live:
            return paths
        if not self._swept:
            self._swept = True
            sweep_orphaned_tmp_dirs()
        token = secrets.token_hex(12)
        tmp = os.path.join(tempfile.gettempdir(), f"{_host_tag()}-{token}")
        home = None
        if self._private_home:
            home = os.path.join(tempfile.gettempdir(), f"{_host_tag(_HOME_PREFIX)}-{token}")
        owner.on_dispose(lambda: _remove_private_dirs(tmp, home), late=True)
        self._tmp_dirs[owner] = paths = (tmp, home)
        return paths

    def set_mode(self, owner: Agent, mode: SandboxMode | str) -> Policy:
        """Override ``owner``'s mode and return its new effective policy.

        Raises :class:`TerminalError` ``INVALID_ARGUMENT`` for an unknown mode, and
        ``SANDBOX_MODE_LOCKED`` when the effective mode would change while the owner has
        a persistent session open or being created (those shells keep the confinement
        they started with). Re-asserting the current effective mode always succeeds.
        """
        try:
            new_mode = _to_mode(mode)
        except ValueError as exc:
            raise TerminalError(str(exc), "INVALID_ARGUMENT") from exc
        current = self.resolve(owner).mode
        if new_mode is not current and self._activity is not None and self._activity(owner):
            raise TerminalError(
                f"cannot change sandbox mode from {current.value} to {new_mode.value} while "
                "persistent terminal sessions are open or being created; close them first",
                "SANDBOX_MODE_LOCKED",
            )
        self._overrides[owner] = new_mode
        return self.resolve(owner)

    def override(self, owner: Agent) -> SandboxMode | None:
        """``owner``'s own mode when one was set for it, else None (it takes the default).

        A world keeps its own default (what it can enforce there) for owners on the
        harness's; only a mode chosen for the owner travels to it.
        """
        return self._overrides.get(owner)

    def forget(self, owner: Agent) -> None:
        """Drop ``owner``'s override (at owner disposal); harmless when there is none."""
        self._overrides.pop(owner, None)


def _remove_private_dirs(tmp: str, home: str | None) -> None:
    _remove_tmp_dir(tmp)
    if home is not None:
        _remove_tmp_dir(home)


def _remove_tmp_dir(path: str) -> None:
    """Remove an owner's private ``/tmp`` and all it holds; nothing to do if never created.

    The sandbox creates it 0700 for the harness's own user, so everything inside belongs
    to that user; read-only subdirectories made by a program are made writable first.
    Nothing outside ``path`` is ever changed: its parent is the host's shared ``/tmp``,
    which a failure to remove ``path`` itself (a removal racing another, a mount point)
    once made 0700, closing it to every other user.
    """

    def make_writable_and_retry(function: object, target: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            if target != path:
                os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        if callable(function):
            function(target)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=make_writable_and_retry)


def _start_tag(create_time: float) -> str:
    return str(round(create_time * 100))


def _host_tag(prefix: str = _TMP_PREFIX) -> str:
    """``dsh-tmp-<pid>-<start>``: names this process by an identity pid reuse cannot fake."""
    return f"{prefix}{os.getpid()}-{_start_tag(psutil.Process().create_time())}"


def sweep_orphaned_tmp_dirs(directory: str | None = None) -> list[str]:
    """Remove private ``/tmp`` directories and home stores whose host process no longer
    runs; return them.

    Only this user's directories named by :func:`_host_tag` are considered, and one is
    removed only when no process with its pid and start time exists, so a live host's
    directories (this one's or another harness's) are never touched.
    """
    directory = directory if directory is not None else tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        prefix = next((p for p in (_TMP_PREFIX, _HOME_PREFIX) if name.startswith(p)), None)
        if prefix is None:
            continue
        parts = name[len(prefix) :].split("-")
        if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        path = os.path.join(directory, name)
        try:
            if os.lstat(path).st_uid != os.geteuid() or _host_alive(int(parts[0]), parts[1]):
                continue
            _remove_tmp_dir(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def _host_alive(pid: int, start: str) -> bool:
    try:
        return _start_tag(psutil.Process(pid).create_time()) == start
    except psutil.Error:
        return False
