"""dsh-terminal core: harness kernel, local PTY provider, session registry, sandbox."""

from .agents import Agent
from .cancel import Cancellation
from .errors import DshError, ErrorCode, InvalidArgument, TerminalError
from .harness import Harness
from .hookspecs import hookimpl
from .plugins import PluginInfo
from .tools import Tool, ToolExec, ToolResult

__all__ = [
    "Agent",
    "Cancellation",
    "DshError",
    "ErrorCode",
    "Harness",
    "InvalidArgument",
    "PluginInfo",
    "TerminalError",
    "Tool",
    "ToolExec",
    "ToolResult",
    "hookimpl",
]
