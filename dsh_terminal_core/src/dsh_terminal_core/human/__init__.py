"""A person in the loop (SPEC §22): watch links, the live page, taking over, asking for help.

Owns: :class:`HumanService` (``ctx.human``) and its watch links (:mod:`.service`), the
page and its endpoints as a plain ASGI app (:mod:`.app`, :mod:`.page`), the loopback
server that runs that app when no MCP HTTP server does (:mod:`.loopback`), and the core
``human`` plugin (:mod:`.plugin`). The control gate itself — who may type into a
session — is the registry's (:mod:`dsh_terminal_core.registry.control`).

May import: the kernel and the registry. The MCP server mounts the app on its own
address (:mod:`dsh_terminal_core.mcp.http`) and asks people over URL-mode elicitation.
"""

from .service import (
    ASK_TTL_S,
    DEFAULT_TTL_S,
    MAX_TTL_S,
    HumanService,
    WatchLink,
)

__all__ = ["ASK_TTL_S", "DEFAULT_TTL_S", "MAX_TTL_S", "HumanService", "WatchLink"]
