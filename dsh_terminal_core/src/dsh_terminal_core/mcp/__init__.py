"""The MCP server: every registered tool over stdio and streamable HTTP, both revisions.

Owns: the stdio and HTTP transports (:mod:`.server`, :mod:`.stdio`, :mod:`.http`),
per-client identities and bearer tokens (:mod:`.identities`, :mod:`.tokens`), asking a
person (:mod:`.asks`, the loopback secret page :mod:`.secret_page`), the
notifications that wake clients (:mod:`.notify`, :mod:`.wake`), and which tools a server
offers under a tool profile (:mod:`.profiles`, ``--tools``).

May import: the kernel, the provider (the host-exit backstop), the sandbox (its health
line), the secrets layer, and the MCP SDK (the ``[mcp]`` extra). Nothing below imports
it; the CLI starts it.
"""
