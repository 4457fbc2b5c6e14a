"""Execution worlds (SPEC §21): shells where the work runs, every fact decided there.

Owns: the framed, versioned protocol (:mod:`.frames`, :mod:`.messages`,
:mod:`.connection`), the world agent that serves it beside the shells (:mod:`.agent`,
:mod:`.serve`), and the harness side that reaches a world — a transport, a link, and
sessions backed by a mirror of the world's scrollback (:mod:`.transport`, :mod:`.link`,
:mod:`.session`, :mod:`.backend`, plugin ``worlds``). docs/design/execution-worlds.md
is the design.

May import: the kernel, the provider, the registry and the sandbox. The MCP server and
the CLI sit above it.
"""
