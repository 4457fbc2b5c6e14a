"""dsh-terminal core: harness kernel, PTY provider, session registry, sandbox, MCP server.

Everything a plugin author needs is importable from this package itself (see
``__all__``): the hook markers, :class:`PluginInfo`, :class:`Context`, the wiring helper
:func:`optional_dependency`, :class:`Agent`, :class:`Cancellation`, tools, the errors
and :class:`ErrorCode`, the config validators and :func:`cap_text`.

The package is one folder per layer, each importing only the layers below it:

- :mod:`.kernel` — plugins, DI wiring, agents, tools, jobs, prompt, errors (imports none)
- :mod:`.provider` — PTY processes and their ``/proc`` facts (kernel)
- :mod:`.sandbox` — policy and bubblewrap (kernel, provider)
- :mod:`.registry` — owner-scoped sessions, the backend contracts (kernel, provider)
- :mod:`.secrets` — named secrets behind ``ctx.secrets`` (kernel)
- :mod:`.records` — session recordings and the audit log (kernel, provider, registry)
- :mod:`.mcp` — the MCP server over stdio and HTTP (all of the above)
- :mod:`.cli` — the ``dsh-terminal`` command and the demo (everything)
- :mod:`.testing` — doubles for plugin tests (kernel, registry)

The flat layout's module paths (``dsh_terminal_core.errors``,
``dsh_terminal_core.terminals``, ``dsh_terminal_core.harness``, ...) still import, as
the same modules (:mod:`.kernel.legacy_paths`). docs/reference.md lists the public
surface.
"""

from .kernel.agents import Agent
from .kernel.cancel import Cancellation, finish_shielded
from .kernel.config import boolean, non_empty_str, optional_str, positive_int, str_list
from .kernel.context import Context, ServiceMissing
from .kernel.errors import (
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
from .kernel.harness import Harness
from .kernel.hookspecs import hookimpl, hookspec
from .kernel.legacy_paths import install as _install_legacy_paths
from .kernel.plugins import PluginInfo
from .kernel.resultcap import MAX_RESULT_BYTES, cap_text
from .kernel.tooldecl import tool
from .kernel.tools import Tool, ToolExec, ToolResult
from .kernel.wiring import optional_dependency

_install_legacy_paths(__name__)

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
    "tool",
]
