"""A person in the loop (SPEC §22): watch links, the live page, taking over, asking for help.

Owns: :class:`HumanService` (``ctx.human``) and its watch links (:mod:`.service`), the
page and its endpoints as a plain ASGI app (:mod:`.app`, :mod:`.page`, :mod:`.views`,
:mod:`.respond`, :mod:`.follow`), the byte tap that feeds the page's real terminal each
session's own output (:mod:`.bytetap`, SPEC §31), the browser files from npm
(:mod:`.assets`), the operator's links and pages — a recording played, an identity's
overview (:mod:`.operator`, :mod:`.operator_app`) — the loopback server that runs the app
when no MCP HTTP server does (:mod:`.loopback`), and the core ``human`` plugin
(:mod:`.plugin`). The control gate itself — who may type into a session — is the
registry's (:mod:`dsh_terminal_core.registry.control`).

May import: the kernel, the provider (the tap wraps its processes) and the registry. The
MCP server mounts the app on its own address (:mod:`dsh_terminal_core.mcp.http`) and asks
people over URL-mode elicitation.
"""

from .service import (
    ASK_TTL_S,
    DEFAULT_TTL_S,
    MAX_TTL_S,
    HumanService,
    WatchLink,
)

__all__ = ["ASK_TTL_S", "DEFAULT_TTL_S", "MAX_TTL_S", "HumanService", "WatchLink"]
