"""dsh-terminal core: harness kernel, local PTY provider, session registry, sandbox.

Everything a plugin author needs is importable from this package itself (see
``__all__``): the hook markers, :class:`PluginInfo`, :class:`Context`, the wiring helper
:func:`optional_dependency`, :class:`Agent`, :class:`Cancellation`, tools, the errors
and :class:`ErrorCode`, the config validators and :func:`cap_text`.

Public subpackages with their own ``__all__``: :mod:`.terminals` (backend and consumer
surface of the session registry), :mod:`.provider` (the PTY process protocol a backend
drives), :mod:`.harness` (``Harness``), :mod:`.hookspecs`, :mod:`.errors`, :mod:`.config`.
Every other module (``plugins``, ``context``, ``containers``, ``wiring``, ``jobs``,
``job_tools``, ``prompt``, ``resultcap``, ``textbounds``, ``cancel``, ``agents``,
``tools``, ``sandbox``, ``core_plugins``, ``cli``, ``demo``, ``mcp_*``, ``testing``, and
the modules inside ``provider`` and ``terminals``) is internal: import what it offers
from here or from the public subpackages; its layout may change without notice.
"""

from .agents import Agent
from .cancel import Cancellation
from .config import boolean, non_empty_str, optional_str, positive_int, str_list
from .context import Context, ServiceMissing
from .errors import (
    BackendCleanupError,
    ConfigError,
    DshError,
    ErrorCode,
    InvalidArgument,
    OperationCancelled,
    PluginLoadError,
    SandboxUnavailable,
    TerminalError,
    UnsupportedPlatform,
)
from .harness import Harness
from .hookspecs import hookimpl, hookspec
from .plugins import PluginInfo
from .resultcap import cap_text
from .tools import Tool, ToolExec, ToolResult
from .wiring import optional_dependency

__all__ = [
    "Agent",
    "BackendCleanupError",
    "Cancellation",
    "ConfigError",
    "Context",
    "DshError",
    "ErrorCode",
    "Harness",
    "InvalidArgument",
    "OperationCancelled",
    "PluginInfo",
    "PluginLoadError",
    "SandboxUnavailable",
    "ServiceMissing",
    "TerminalError",
    "Tool",
    "ToolExec",
    "ToolResult",
    "UnsupportedPlatform",
    "boolean",
    "cap_text",
    "hookimpl",
    "hookspec",
    "non_empty_str",
    "optional_dependency",
    "optional_str",
    "positive_int",
    "str_list",
]
