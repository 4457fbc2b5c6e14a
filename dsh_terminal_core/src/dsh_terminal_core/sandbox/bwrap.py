"""Filesystem confinement for terminal shells with bubblewrap (``bwrap``).

:meth:`BwrapSandbox.confine` turns a shell's argv into a ``bwrap`` argv that enforces a
:class:`~.policy.Policy`. What is confined, and what is deliberately not:

* **Filesystem** — the whole tree is bound read-only; ``workspace-write`` adds writable
  binds of the workspace root and ``/tmp``. ``/dev`` is bwrap's minimal device tree
  (null, zero, random, tty, ...; no disks) and ``/proc`` a fresh procfs. The shell keeps
  its PTY fds from the host, ``/dev/tty`` still opens the controlling terminal, and bwrap
  binds that terminal at ``/dev/console``, so ``tty`` inside reports ``/dev/console``.
* **Processes** — the pid namespace is *shared* (no ``--unshare-pid``). The provider
  inspects and signals the shell's foreground process group by host pid and reads
  ``/proc/<pid>/...`` of its members to tell whether a program waits for input; a private
  pid namespace would hide exactly those processes. Full-tree teardown also relies on
  seeing the shell's descendants.
* **Network** — shared. The modes describe what may be *written*; fetching packages or
  cloning repositories into the workspace is ordinary agent work, and cutting the
  network would be a separate policy rather than a side effect of a filesystem mode.
* **Users** — no ``--unshare-user``: as root ``bwrap`` creates its mount namespace
  directly, and as an unprivileged user it sets up the user namespace it needs by itself.
* **Terminal** — no ``--new-session``. ``setsid`` inside the sandbox would detach the
  shell from its controlling terminal: no job control, no foreground group to read or
  signal, no SIGINT from the terminal. The usual reason for ``--new-session`` is that
  ``TIOCSTI`` can push input into the controlling terminal; here that terminal is the
  session's own PTY, whose only reader is the sandboxed shell itself, so injected input
  lands back inside the sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence

import attrs

from ..errors import SandboxUnavailable, TerminalError
from .policy import Policy, SandboxMode

__all__ = ["BwrapConfig", "BwrapSandbox"]

_PROBE_TIMEOUT_S = 5.0


def _check_path(_inst: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a non-empty string or null; got {value!r}")


@attrs.frozen(kw_only=True)
class BwrapConfig:
    """Config of the ``sandbox-bwrap`` plugin; ``bwrap_path=None`` searches ``PATH``."""

    bwrap_path: str | None = attrs.field(default=None, validator=_check_path)


def _within(path: str, parent: str) -> bool:
    return os.path.commonpath([path, parent]) == parent and path != parent


def _mount_arguments(policy: Policy) -> list[str]:
    """Return the ``bwrap`` options that enforce ``policy`` (a confined one).

    Later mounts shadow earlier ones, so the order matters: the read-only root first,
    then the writable (or private) pieces, and ``/dev`` and ``/proc`` last so a
    workspace of ``/`` cannot hide them.
    """
    root = policy.workspace_root
    args = ["--ro-bind", "/", "/"]
    if policy.mode is SandboxMode.WORKSPACE_WRITE:
        # The real /tmp, writable: tools hand files to each other through it (editors,
        # compilers, heredocs, test runners), and what the shell leaves there must stay
        # visible to the host and to the agent's later sessions.
        args += ["--bind", "/tmp", "/tmp", "--bind", root, root]
    else:
        # A private, empty, writable /tmp: programs that need scratch space still run,
        # and nothing they write there reaches the host or outlives the sandbox.
        args += ["--tmpfs", "/tmp"]
        if _within(root, "/tmp"):
            # The tmpfs would hide a workspace under /tmp; keep it visible, read-only.
            args += ["--ro-bind", root, root]
    args += ["--dev", "/dev", "--proc", "/proc"]
    # A dead harness takes its sandboxed shells with it instead of orphaning them.
    args.append("--die-with-parent")
    return args


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

    @property
    def executable(self) -> str | None:
        """The resolved ``bwrap`` path, or ``None`` when it was not found or does not work."""
        self._probe()
        return self._executable

    def available(self) -> bool:
        """Return whether confined modes can be enforced here.

        The first call runs ``bwrap --ro-bind / / --dev /dev --proc /proc true`` (a few
        milliseconds; bounded by a short timeout); later calls return the cached answer.
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

        ``danger-full-access`` returns ``argv`` unchanged. A confined mode raises
        :class:`SandboxUnavailable` when ``bwrap`` cannot run here (nothing silently runs
        unconfined), and :class:`TerminalError` ``INVALID_ARGUMENT`` for an empty argv or
        a workspace root that no longer exists. The working directory is left to the
        spawner: the whole tree is visible inside, so any host cwd exists there too.
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
        return [self._executable, *_mount_arguments(policy), "--", *argv]

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
                [found, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"],
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
