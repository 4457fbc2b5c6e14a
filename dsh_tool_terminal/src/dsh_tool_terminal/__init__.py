"""dsh-terminal model-facing tools: terminal_open/send/read/signal/close/list, or a tool
profile's in their place (SPEC §30.1): Codex's exec_command/write_stdin (:mod:`.codex`)
or Claude Code's Bash/TaskOutput/TaskStop (:mod:`.claude`)."""

from .claude import claude_tools
from .codex import codex_tools
from .config import PROFILES, ToolTerminalConfig
from .guidance import GUIDANCE
from .tools import terminal_tools

__all__ = [
    "GUIDANCE",
    "PROFILES",
    "ToolTerminalConfig",
    "claude_tools",
    "codex_tools",
    "terminal_tools",
]
