"""dsh-terminal model-facing tools: terminal_open/send/read/signal/close/list."""

from .config import ToolTerminalConfig
from .guidance import GUIDANCE
from .tools import terminal_tools

__all__ = ["GUIDANCE", "ToolTerminalConfig", "terminal_tools"]
