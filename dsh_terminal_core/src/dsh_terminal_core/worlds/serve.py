"""``dsh-terminal world --stdio``: the world agent on its stdin and stdout.

This is what ``kubectl exec -i POD -- dsh-terminal world --stdio``, ``docker exec -i``
and ``ssh -T HOST dsh-terminal world --stdio`` start. The protocol owns the two
descriptors: they are duplicated for it and fd 1 then points at stderr, so a stray print
or a child that inherits stdout cannot corrupt the stream. A TTY on stdin is refused at
once: a terminal in between (``-it``) rewrites bytes the protocol needs intact.

The agent is a harness with exactly the plugins a world needs — the local provider, the
sandbox policy and bubblewrap, the session registry and the bash backend — and no tools.
When the connection ends, every session it opened is torn down and the command returns.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..kernel.configfile import ConfigFileError, build_config
from ..kernel.errors import DshError
from ..kernel.harness import Harness
from ..kernel.plugins import ENTRY_POINT_GROUP
from .agent import WorldAgent
from .connection import Connection
from .frames import DEFAULT_MAX_FRAME

__all__ = ["WORLD_PLUGINS", "serve_stdio", "world_plugins"]

log = logging.getLogger("dsh_terminal_core.worlds")

#: The plugins a world agent loads, by entry-point name: the full local stack, no tools.
WORLD_PLUGINS = (
    "subprocess-local",
    "sandbox-policy",
    "sandbox-bwrap",
    "terminals",
    "terminal-bash",
)

TTY_REFUSED = (
    "dsh-terminal world: stdin is a terminal; the world protocol needs a byte channel: "
    "use `kubectl exec -i`, `docker exec -i` or `ssh -T`, without -t"
)


def world_plugins() -> list[object]:
    """The world's plugin modules, found by entry-point name (the bash backend is its own
    distribution, so it is never imported by name from here)."""
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    missing = [name for name in WORLD_PLUGINS if name not in found]
    if missing:
        raise ConfigFileError(
            f"this world lacks the plugins {', '.join(missing)}; install "
            "dsh-terminal-core and dsh-terminal-bash of the harness's version in it"
        )
    return [found[name].load() for name in WORLD_PLUGINS]


def serve_stdio(config_path: str | None, sandbox: str | None, workspace: str | None) -> int:
    """Run the agent on stdin/stdout until the harness goes; return the exit status."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    if os.isatty(0):
        print(TTY_REFUSED, file=sys.stderr)
        return 2
    try:
        config = build_config(config_path, sandbox, workspace)
        plugins = world_plugins()
    except DshError as exc:
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    try:
        return asyncio.run(_serve(config, plugins, wire_in, wire_out))
    except DshError as exc:
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2


async def _serve(
    config: Mapping[str, Mapping[str, Any]], plugins: list[object], wire_in: int, wire_out: int
) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=DEFAULT_MAX_FRAME)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    async with Harness(plugins=plugins, config=config) as harness:
        agent = WorldAgent(harness)
        try:
            await agent.serve(Connection(reader, writer, max_frame=DEFAULT_MAX_FRAME))
        finally:
            await agent.aclose()
    return 0
