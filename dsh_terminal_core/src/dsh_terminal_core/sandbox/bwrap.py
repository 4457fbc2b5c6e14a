"""Confinement for terminal shells with bubblewrap (``bwrap``).

:meth:`BwrapSandbox.confine` turns a shell's argv into a ``bwrap`` argv that enforces a
confined :class:`~.policy.Policy` (``read-only`` or ``workspace-write``). What holds:

* **Filesystem** — the whole tree is bound read-only; ``workspace-write`` adds a writable
  bind of the workspace root. ``/tmp`` is the owner's private directory (shared by that
  owner's shells, never the host's ``/tmp``). ``/dev`` is bwrap's minimal device tree
  (null, zero, random, tty, a private ``/dev/shm`` and ``/dev/pts``; no disks) and
  ``/proc`` a fresh procfs of the sandbox's own pid namespace. The shell keeps its PTY
  fds from the host, ``/dev/tty`` still opens the controlling terminal, and bwrap binds
  that terminal at ``/dev/console``, so ``tty`` inside reports ``/dev/console``.
* **Home** — with the owner's home store (``Policy.home_dir``), ``$HOME`` is that store,
  writable, holding a symlink to each of the user's entries, which are bound read-only
  at ``/run/dsh-home/...``; the state directories (caches, editor swap and history
  places) are the store's own (:mod:`.home`): programs keep their state, the user's
  files stay untouched. Without one, ``$HOME`` is as read-only as the rest of the tree.
* **Host IPC endpoints** — a fresh, empty tmpfs over ``/run`` (so ``/var/run`` too,
  where docker's, dbus's and the runtime directory's sockets live) and over the runtime
  directory wherever ``XDG_RUNTIME_DIR`` puts it; the variables that name such
  endpoints (:data:`~dsh_terminal_core.provider.env.SOCKET_VARIABLES`) are removed from
  the shell's environment. Sockets elsewhere on the read-only tree stay connectable (a
  read-only mount does not stop ``connect``): keep agent sockets under ``/run`` or
  ``/tmp``.
* **Processes** — new pid, ipc, uts and cgroup namespaces: the shell sees only its own
  processes and can neither signal nor trace nor open ``/proc/<pid>/root`` of a host
  process. The harness still inspects and signals the shell's foreground group by host
  pid and reads its ``/proc/<pid>/...`` from the host's procfs, which sees into the
  child namespace; ``tcgetpgrp`` on the master reports host pids. bwrap's pid 1 reaps
  orphans inside, and when it dies the kernel kills every process of the namespace.
* **Capabilities** — every one dropped (``--cap-drop ALL``): a root shell cannot
  remount, load modules, reconfigure interfaces or bypass file permissions.
* **Network** — ``network = "none"`` (the default): a new network namespace with only
  its own loopback, so no host service, not even one on 127.0.0.1 or behind an abstract
  unix socket, is reachable. ``"host"`` shares the host's network (the operator's
  opt-in, for package installs and ssh); DNS configuration is kept readable then even
  when it lives under ``/run``.
* **Users** — no ``--unshare-user``: as root ``bwrap`` creates its namespaces directly,
  and as an unprivileged user it sets up the user namespace it needs by itself.
* **Terminal** — no ``--new-session``. ``setsid`` inside the sandbox would detach the
  shell from its controlling terminal: no job control, no foreground group to read or
  signal, no SIGINT from the terminal. The usual reason for ``--new-session`` is that
  ``TIOCSTI`` can push input into the controlling terminal; here that terminal is the
  session's own PTY, whose only reader is the sandboxed shell itself, so injected input
  lands back inside the sandbox.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import stat
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol, cast, runtime_checkable

import attrs

from ..kernel.errors import SandboxUnavailable, TerminalError
from ..provider.env import SOCKET_VARIABLES
from .home import HomeLayers
from .policy import NetworkAccess, Policy, SandboxMode

__all__ = ["BwrapConfig", "BwrapSandbox", "SandboxHealth"]


@runtime_checkable
class SandboxHealth(Protocol):
    """What a host asks a sandbox before promising confined shells (``ctx.sandbox``)."""

    def available(self) -> bool:
        """Whether confined modes can be enforced here."""
        ...

    @property
    def unavailable_reason(self) -> str | None:
        """Why not, or ``None`` when they can."""
        ...

    @property
    def remedy(self) -> str:
        """What the operator can do so confined modes work."""
        ...


_PROBE_TIMEOUT_S = 5.0


def _check_path(_inst: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a non-empty string or null; got {value!r}")


@attrs.frozen(kw_only=True)
class BwrapConfig:
    """Config of the ``sandbox-bwrap`` plugin; ``bwrap_path=None`` searches ``PATH``."""

    bwrap_path: str | None = attrs.field(default=None, validator=_check_path)


def _within(path: str, parent: str) -> bool:
    """True if ``path`` is ``parent`` or lies below it."""
    return os.path.commonpath([path, parent]) == parent


def _depth(path: str) -> int:
    return len([part for part in path.split("/") if part])


# Where a layered home's real self is bound inside (in the fresh tmpfs over /run).
_SIDE = "/run/dsh-home"

# Read at each spawn: the name-service files a resolver needs with the host's network.
_DNS_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")


def _hidden_ipc_dirs(environ: Mapping[str, str]) -> list[str]:
    """Directories that hold host IPC endpoints and get an empty tmpfs inside."""
    hidden = [
        path for path in ("/run", "/var/run") if os.path.isdir(path) and not os.path.islink(path)
    ]
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        runtime = os.path.realpath(runtime)
        if not any(_within(runtime, parent) for parent in (*hidden, "/tmp")):
            hidden.append(runtime)
    return hidden


def _namespace_arguments(network: NetworkAccess) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
    if network is NetworkAccess.NONE:
        args.append("--unshare-net")
    return [*args, "--cap-drop", "ALL"]


def _confinement_arguments(
    policy: Policy, environ: Mapping[str, str], layers: HomeLayers | None = None
) -> list[str]:
    """Return the ``bwrap`` options that enforce ``policy`` (a confined one).

    Later mounts shadow earlier ones, so every mount is placed after the mounts of its
    ancestors (sorted by depth; at equal depth the workspace comes last, so a workspace
    the operator put at ``/tmp`` or under ``/run`` stays what it was configured to be),
    and ``/dev`` and ``/proc`` come last so no workspace can hide them.
    """
    root = policy.workspace_root
    hidden = _hidden_ipc_dirs(environ)
    mounts: list[tuple[str, list[str]]] = [(path, ["--tmpfs", path]) for path in hidden]
    if policy.tmp_dir is not None:
        mounts.append(("/tmp", ["--bind", policy.tmp_dir, "/tmp"]))
    else:
        mounts.append(("/tmp", ["--tmpfs", "/tmp"]))
    if policy.network is NetworkAccess.HOST:
        for name in _DNS_FILES:
            real = os.path.realpath(name)
            if os.path.isfile(real) and any(_within(real, p) for p in (*hidden, "/tmp")):
                mounts.append((real, ["--ro-bind", real, real]))
    homes = _home_layers(policy, environ, hidden, layers) if layers is not None else []
    for _, home_mounts in homes:
        mounts += home_mounts
    if policy.mode is SandboxMode.WORKSPACE_WRITE:
        mounts.append((root, ["--bind", root, root]))
    elif any(_within(root, p) for p in (*hidden, "/tmp", *(home for home, _ in homes))):
        # The tmpfs would hide a workspace there, and a layered home would show it at
        # its side path only; keep it visible at its own, read-only.
        mounts.append((root, ["--ro-bind", root, root]))
    mounts.sort(key=lambda mount: _depth(mount[0]))
    args = ["--ro-bind", "/", "/"]
    for _, mount in mounts:
        args += mount
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += _namespace_arguments(policy.network)
    for name in sorted(SOCKET_VARIABLES):
        args += ["--unsetenv", name]
    # A dead harness takes its sandboxed shells with it instead of orphaning them.
    args.append("--die-with-parent")
    return args


def _home_layers(
    policy: Policy, environ: Mapping[str, str], hidden: Sequence[str], layers: HomeLayers
) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """Each home given the owner's home store, with its mounts.

    Two homes may differ: ``$HOME``, and the password database's, which some programs
    use instead (nano as root, ssh always); each gets a part of the store of its own
    and a side path under the fresh ``/run``. None when the policy names no store or
    there is no fresh ``/run``, and no layering for a home that is writable or hidden
    anyway (inside a writable workspace, under ``/tmp`` or a hidden IPC directory) or is
    ``/``. A workspace inside a home keeps its real path: a directory of the store, with
    the workspace's own bind over it (that bind comes later, being deeper).
    """
    store = policy.home_dir
    if store is None or "/run" not in hidden:
        return []
    # Which homes, and their store parts made: decided once per burst of opens.
    key = (store, environ.get("HOME"), policy.mode, policy.workspace_root, tuple(hidden))
    homes = cast("dict[str, str] | None", layers.recent(key))
    if homes is None:
        homes = _homes(policy, environ, hidden, store)
        layers.remember(key, homes)
    root = policy.workspace_root
    layered = []
    for home, part in homes.items():
        keep = [root] if root != home and _within(root, home) else []
        side = os.path.join(_SIDE, part)
        path = os.path.join(store, part)
        layered.append((home, layers.mounts(home, path, side, policy.home_state_dirs, keep)))
    return layered


def _homes(
    policy: Policy, environ: Mapping[str, str], hidden: Sequence[str], store: str
) -> dict[str, str]:
    """The homes to layer, each with its part of the store (made here if missing)."""
    homes: dict[str, str] = {}  # home -> its part of the store
    candidates = ((environ.get("HOME", ""), "home"), (_password_home(os.geteuid()), "passwd-home"))
    for home, part in candidates:
        if not os.path.isabs(home) or not os.path.isdir(home):
            continue
        home = os.path.realpath(home)
        if home == "/" or home in homes or any(_within(home, p) for p in (*hidden, "/tmp")):
            continue
        if policy.mode is SandboxMode.WORKSPACE_WRITE and _within(home, policy.workspace_root):
            continue
        homes[home] = part
    if not homes:
        return homes
    _ensure_private_tmp(store, "home store")
    for part in homes.values():
        # The store's top is never bound into a sandbox: no shell can plant a link here.
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.join(store, part), 0o700)
    return homes


@functools.lru_cache(maxsize=4)
def _password_home(uid: int | None = None) -> str:
    """The password database's home of ``uid`` (this user); read once, not per shell."""
    try:
        return pwd.getpwuid(os.geteuid() if uid is None else uid).pw_dir
    except KeyError:
        return ""


def _ensure_private_tmp(path: str, what: str = "private /tmp") -> None:
    """Create the owner's private ``/tmp`` or home store (0700), or check the one made.

    The name is unguessable, but it lives in a world-writable directory: anything found
    there that is not a directory of ours, closed to others, is refused rather than used.
    """
    try:
        os.mkdir(path, 0o700)
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise SandboxUnavailable(
            f"cannot create the {what} {path!r} for the sandbox ({exc.strerror or exc})"
        ) from exc
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SandboxUnavailable(
            f"refusing to use {path!r} as a {what}: it is not a directory owned by "
            "this user and closed to others"
        )


class BwrapSandbox:
    """Wrap argv in bubblewrap according to a policy; the ``sandbox`` service.

    Whether ``bwrap`` works is decided once, by running it (containers often ship the
    binary but forbid the namespaces it needs); the answer and its reason are cached.
    """

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self._config = config if config is not None else BwrapConfig()
        self._lock = threading.Lock()
        self._probed = False
        self._executable: str | None = None
        self._reason: str | None = None
        self._refused = False  # bwrap ran, and its trial failed: namespaces not allowed
        self._layers = HomeLayers()  # the owners' home stores, kept in step with the homes

    @property
    def executable(self) -> str | None:
        """The resolved ``bwrap`` path, or ``None`` when it was not found or does not work."""
        self._probe()
        return self._executable

    def available(self) -> bool:
        """Return whether confined modes can be enforced here.

        The first call runs ``bwrap`` once with every namespace and the capability drop a
        confined shell gets (a few milliseconds; bounded by a short timeout); later calls
        return the cached answer.
        """
        self._probe()
        return self._executable is not None

    @property
    def unavailable_reason(self) -> str | None:
        """Why ``bwrap`` cannot be used (probing first if needed); ``None`` when it can."""
        self._probe()
        return self._reason

    @property
    def remedy(self) -> str:
        """What the operator can do so confined modes work here (probing first if needed).

        A missing ``bwrap`` is installed; an installed one that cannot create namespaces
        (unprivileged user namespaces restricted, as on Ubuntu 24.04, or a container
        without them) needs those allowed — installing it again would change nothing.
        """
        self._probe()
        if self._refused:
            return (
                "allow unprivileged user namespaces for bwrap (e.g. on Ubuntu 24.04 "
                "'sysctl kernel.apparmor_restrict_unprivileged_userns=0' or an AppArmor "
                "profile for bwrap; in a container, run it with user namespaces allowed)"
            )
        return "install bubblewrap (e.g. apt-get install bubblewrap)"

    def confine(self, argv: Sequence[str], policy: Policy) -> list[str]:
        """Return the argv that runs ``argv`` under ``policy``.

        ``danger-full-access`` returns ``argv`` unchanged. For a confined mode this
        creates the policy's private ``/tmp`` directory if it does not exist yet. It
        raises :class:`SandboxUnavailable` when ``bwrap`` cannot run here (nothing
        silently runs unconfined) or the private ``/tmp`` cannot be made, and
        :class:`TerminalError` ``INVALID_ARGUMENT`` for an empty argv or a workspace root
        that no longer exists. The working directory is left to the spawner: the whole
        tree is visible inside, so any host cwd exists there too (a cwd under ``/tmp`` or
        ``/run`` outside the workspace is hidden, and the shell starts in ``/``).
        """
        if not argv:
            raise TerminalError("cannot confine an empty argv", "INVALID_ARGUMENT")
        if not policy.confined:
            return list(argv)
        if not self.available():
            raise SandboxUnavailable(
                f"bubblewrap (bwrap) is required for sandbox mode '{policy.mode.value}' but "
                f"{self._reason}. This is the host's setting, which no tool call can change: "
                f"the operator must {self.remedy}, or choose sandbox mode "
                "'danger-full-access' explicitly"
            )
        if not os.path.isdir(policy.workspace_root):
            raise TerminalError(
                f"sandbox workspace root {policy.workspace_root!r} does not exist or is not "
                "a directory",
                "INVALID_ARGUMENT",
            )
        assert self._executable is not None
        if policy.tmp_dir is not None:
            _ensure_private_tmp(policy.tmp_dir)
        arguments = _confinement_arguments(policy, os.environ, self._layers)
        return [self._executable, *arguments, "--", *argv]

    def _probe(self) -> None:
        with self._lock:
            if self._probed:
                return
            self._executable, self._reason = self._run_probe()
            self._probed = True

    def _run_probe(self) -> tuple[str | None, str | None]:
        configured = self._config.bwrap_path
        found = shutil.which(configured if configured is not None else "bwrap")
        if found is None:
            if configured is None:
                return None, "it was not found on PATH"
            return None, f"{configured!r} does not exist or is not executable"
        found = os.path.abspath(found)
        try:
            done = subprocess.run(
                [
                    found,
                    *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
                    *_namespace_arguments(NetworkAccess.NONE),
                    "true",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None, f"{found} did not finish a trial run within {_PROBE_TIMEOUT_S:g} s"
        except OSError as exc:
            return None, f"{found} could not be started ({exc.strerror or exc})"
        if done.returncode != 0:
            self._refused = True
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = detail[-1] if detail else f"exit status {done.returncode}"
            return None, (
                f"{found} is installed but cannot create the namespaces it needs here ({why})"
            )
        return found, None
