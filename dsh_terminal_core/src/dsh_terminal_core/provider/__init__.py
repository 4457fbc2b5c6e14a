"""The terminal-process provider (``ctx.subprocess``): local PTY children, owned end to end.

Owns: spawning on a PTY (here or through the fork server), the process facts every
readiness proof reads from ``/proc`` (:mod:`.inspector`, :mod:`.listening`), signalling,
whole-tree teardown (and the forced emptying of a session's cgroup, :mod:`.cgroups`)
and the host-exit backstop, and the core ``subprocess-local`` plugin
(:mod:`.plugin`). Backends import from here; the modules behind it are private.

May import: the kernel only.
"""

from .cgroups import CgroupGroup, LimitCounts
from .env import child_environment, is_scrubbed_name
from .hostexit import kill_all_sync
from .inspector import QuietHelpers, StdinProbe, TerminalIdentity
from .listening import (
    Listener,
    ListenerValue,
    has_children,
    listeners,
    listening_in_session,
    session_processes,
)
from .process_table import (
    ProcessIdentity,
    ProcessInfo,
    ProcessTable,
    ProcfsProcessTable,
    PsutilProcessTable,
    default_process_table,
)
from .taskfacts import in_plain_read
from .teardown import ShellControl, TreeReaper
from .terminal import FOREGROUND_SIGNALS, LocalTerminalProcess, LocalTerminalProvider
from .types import (
    ExitStatus,
    Foreground,
    OutputHandler,
    ProcessWrapper,
    TerminalProcess,
    TerminalProvider,
    TerminalSpawnSpec,
    WrappingProvider,
)

__all__ = [
    "FOREGROUND_SIGNALS",
    "CgroupGroup",
    "ExitStatus",
    "Foreground",
    "LimitCounts",
    "Listener",
    "ListenerValue",
    "LocalTerminalProcess",
    "LocalTerminalProvider",
    "OutputHandler",
    "ProcessIdentity",
    "ProcessInfo",
    "ProcessTable",
    "ProcessWrapper",
    "ProcfsProcessTable",
    "PsutilProcessTable",
    "ShellControl",
    "QuietHelpers",
    "StdinProbe",
    "TerminalIdentity",
    "TerminalProcess",
    "TerminalProvider",
    "TerminalSpawnSpec",
    "TreeReaper",
    "WrappingProvider",
    "child_environment",
    "default_process_table",
    "has_children",
    "in_plain_read",
    "is_scrubbed_name",
    "kill_all_sync",
    "listeners",
    "listening_in_session",
    "session_processes",
]
