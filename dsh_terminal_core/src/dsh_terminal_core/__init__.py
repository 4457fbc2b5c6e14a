"""dsh-terminal core: harness kernel, local PTY provider, session registry, sandbox.

Everything a plugin author needs is importable from this package itself (see
``__all__``): the hook markers, :class:`PluginInfo`, :class:`Context`, the wiring helper
:func:`optional_dependency`, :class:`Agent`, :class:`Cancellation`, tools, the errors
and :class:`ErrorCode`, the config validators and :func:`cap_text`.

Public subpackages and modules with their own ``__all__``: :mod:`.terminals` (backend
and consumer surface of the session registry), :mod:`.provider` (the PTY process
protocol a backend drives), :mod:`.harness`, :mod:`.hookspecs`, :mod:`.errors`,
:mod:`.config`, :mod:`.textbounds`, :mod:`.resultcap`, :mod:`.signals`. Every other
module (``plugins``, ``context``, ``containers``, ``wiring``, ``jobs``, ``job_tools``,
``prompt``, ``cancel``, ``agents``, ``tools``, ``sandbox``, ``core_plugins``, ``cli``,
``demo``, ``mcp_*``, ``testing``, and the modules inside ``provider`` and
``terminals``) is internal: import what it offers from here or from the public
modules; its layout may change without notice. docs/reference.md lists the same.
"""

from .agents import Agent
from .cancel import Cancellation, finish_shielded
from .config import boolean, non_empty_str, optional_str, positive_int, str_list
from .context import Context, ServiceMissing
from .errors import (
    BackendCleanupError,
    ConfigError,
    DisposeError,
    DshError,
    ErrorCode,
    InvalidArgument,
    OperationCancelled,
    PluginLoadError,
    SandboxUnavailable,
    TerminalError,
    UnsupportedPlatform,
    owner_not_live,
)
from .harness import Harness
from .hookspecs import hookimpl, hookspec
from .plugins import PluginInfo
from .resultcap import MAX_RESULT_BYTES, cap_text
from .tools import Tool, ToolExec, ToolResult
from .wiring import optional_dependency

__all__ = [
    "MAX_RESULT_BYTES",
    "Agent",
    "BackendCleanupError",
    "Cancellation",
    "ConfigError",
    "Context",
    "DisposeError",
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
    "finish_shielded",
    "hookimpl",
    "hookspec",
    "non_empty_str",
    "optional_dependency",
    "optional_str",
    "owner_not_live",
    "positive_int",
    "str_list",
]
